"""The trace breakdown: one rank's profiler window reduced to where its time went. Torch-free.

The run writes it (the sampled window, benchmarks/profiling.py: `breakdown_rank<R>.json`, the raw trace
only when asked) and analysis reads it (analysis/breakdown.py sets it beside the phase timers), so the
reduction lives here, below both.

Every device event (GPU trace) or host op (CPU trace) is put in one class: communication (NCCL
kernels, gloo collectives), compute, memcpy, memset. On a GPU trace compute is split further by kernel
name: cuDNN convolution (`conv`: forward, data- and weight-gradient kernels and cuDNN's layout
transforms), GEMM (`gemm`: cuBLAS / CUTLASS matrix products) and `other_compute`; communication per
collective (`allreduce`, `allgather`, `reducescatter`, `broadcast`, `sendrecv`, ...; DDP, Horovod and
DeepSpeed all run NCCL kernels, so one classifier serves all three); copies into host-to-device
(`h2d`: the input batches the GPU waits for) and the rest. Within the profiled steps the union of each
class is taken; overlap is the intersection of communication with the rest of the work, exposed
communication = communication - overlap (GPU) or, on the host, every gap in the work that meets a
collective (the waiting thread idles until the result is handed back); idle = the rest. Shares of the
window: compute + memcpy + comm_exposed + idle = 1 (comm_total overlaps); conv + gemm + other_compute =
compute.

Pure functions (dicts and lists in, dataclasses out) plus one reader.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

BREAKDOWN_SCHEMA_VERSION = 1


def breakdown_path(run_dir: Path, rank: int) -> Path:
    """The per-rank trace breakdown a run writes (a record format: analysis/load/records.py reads it)."""
    return Path(run_dir) / f"breakdown_rank{rank}.json"


Interval = tuple[float, float]

# NCCL kernels on GPU (only those: compute kernels' template names hold words like "broadcast");
# on CPU gloo's transfer annotations and the c10d ops that enqueue them
DEVICE_COMM_PATTERN = re.compile(r"nccl", re.I)
HOST_COMM_PATTERN = re.compile(r"nccl|gloo:|c10d::", re.I)
PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")
DEVICE_CATEGORIES = {"kernel": "compute", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
CLASSES = ("compute", "communication", "memcpy", "memset")
# compute kernels by name (GPU traces). cuDNN names its convolution kernels by pass (fprop, dgrad,
# wgrad), algorithm (implicit_gemm, winograd) or "conv"; the layout transforms and padding around them
# are cuDNN's too. The test for convolution comes first: implicit-GEMM convolutions are no matrix
# product. cuBLAS's matrix products are named gemm, or nvjet (cuBLASLt's kernels on Hopper). Names seen
# on an H200 (ResNet-50, bf16, channels_last): docs/results/2026-12-01-h200.md
CONV_PATTERN = re.compile(r"conv|fprop|dgrad|wgrad|implicit_gemm|winograd|nchwToNhwc|nhwcToNchw|AddPadding", re.I)
GEMM_PATTERN = re.compile(r"gemm|cublas|cutlass|matmul|nvjet", re.I)
# ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_AllGather_..., ncclDevKernel_SendRecv; on the
# host gloo:all_reduce and c10d::allreduce_
COLLECTIVE_PATTERN = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)|gloo:([a-z_]+)|c10d::([a-z_]+?)_?$")
H2D_PATTERN = re.compile(r"HtoD", re.I)


# --- interval arithmetic -----------------------------------------------------------------------


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same points."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def length(intervals: Iterable[Interval]) -> float:
    return sum(e - s for s, e in intervals)


def intersect(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """Intersection of two unions (sorted, disjoint)."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a: Sequence[Interval], b: Sequence[Interval]) -> list[Interval]:
    """a minus b, both unions."""
    out: list[Interval] = []
    for start, end in a:
        cursor = start
        for b_start, b_end in b:
            if b_end <= cursor or b_start >= end:
                continue
            if b_start > cursor:
                out.append((cursor, b_start))
            cursor = max(cursor, b_end)
        if cursor < end:
            out.append((cursor, end))
    return out


# --- the trace ---------------------------------------------------------------------------------


def compute_kind(name: str) -> str:
    """conv, gemm or other_compute, for a compute kernel's name."""
    if CONV_PATTERN.search(name):
        return "conv"
    return "gemm" if GEMM_PATTERN.search(name) else "other_compute"


def collective_name(name: str) -> str:
    """allreduce, allgather, reducescatter, broadcast, sendrecv, ... for an NCCL kernel's or a gloo / c10d
    op's name."""
    match = COLLECTIVE_PATTERN.search(name)
    if not match:
        return "other_comm"
    return next(g for g in match.groups() if g).replace("_", "").lower()


def read_trace(path: Path) -> dict:
    """A Chrome trace written by torch.profiler (.json or .json.gz)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def classify(event: dict, *, device_trace: bool) -> str | None:
    """The class of one trace event, or None for what is not work (annotations, flows, metadata).

    GPU traces: device events only (the host ops only launch them). CPU traces: host ops and the
    gloo transfer annotations; the forward/optimizer annotations count as compute (Python between
    ops is the phase's work too), ProfilerStep#N is the window, not work."""
    if event.get("ph") != "X":
        return None
    category, name = event.get("cat", ""), event.get("name", "")
    if device_trace:
        kind = DEVICE_CATEGORIES.get(category)
        if kind == "compute" and DEVICE_COMM_PATTERN.search(name):
            return "communication"
        return kind
    if category not in ("cpu_op", "user_annotation") or PROFILER_STEP.match(name):
        return None
    return "communication" if HOST_COMM_PATTERN.search(name) else "compute"


def step_windows(trace: dict) -> dict[int, Interval]:
    """Global step -> [start, end] in trace microseconds, from the ProfilerStep#N annotations
    (the device-side ones where the trace has them)."""
    host: dict[int, Interval] = {}
    device: dict[int, Interval] = {}
    for event in trace["traceEvents"]:
        match = PROFILER_STEP.match(event.get("name", ""))
        if match and event.get("ph") == "X":
            target = device if event.get("cat") == "gpu_user_annotation" else host
            start = float(event["ts"])
            target[int(match.group(1))] = (start, start + float(event.get("dur", 0)))
    return device or host


@dataclass(slots=True, kw_only=True)
class TraceBreakdown:
    """Seconds within the window, and shares of it (compute + memcpy + comm_exposed + idle = 1).

    The finer split (GPU traces; on a CPU trace compute is all other_compute and there is no h2d):
    conv_s + gemm_s + other_compute_s = compute_s; h2d_s <= memcpy_s; per collective, its total and its
    exposed seconds (allreduce_s, allreduce_exposed_s: the gradient all-reduce whatever the framework)."""

    window_s: float
    compute_s: float
    memcpy_s: float  # memcpy and memset not under compute
    comm_total_s: float
    comm_overlap_s: float
    comm_exposed_s: float
    idle_s: float
    steps: list[int]
    conv_s: float = 0.0
    gemm_s: float = 0.0
    other_compute_s: float = 0.0
    h2d_s: float = 0.0  # host-to-device copies not under compute: the I/O the GPU sees
    collectives_s: dict[str, float] = field(default_factory=dict)  # collective -> total seconds
    collectives_exposed_s: dict[str, float] = field(default_factory=dict)  # collective -> exposed seconds

    @property
    def allreduce_s(self) -> float:
        return self.collectives_s.get("allreduce", 0.0)

    @property
    def allreduce_exposed_s(self) -> float:
        return self.collectives_exposed_s.get("allreduce", 0.0)

    def shares(self) -> dict[str, float]:
        w = self.window_s or float("nan")
        return {
            "compute": self.compute_s / w,
            "memcpy": self.memcpy_s / w,
            "comm_exposed": self.comm_exposed_s / w,
            "idle": self.idle_s / w,
            "comm_total": self.comm_total_s / w,
            "conv": self.conv_s / w,
            "gemm": self.gemm_s / w,
            "other_compute": self.other_compute_s / w,
            "h2d": self.h2d_s / w,
            "allreduce": self.allreduce_s / w,
            "allreduce_exposed": self.allreduce_exposed_s / w,
        }

    def record(self) -> dict:
        """The JSON-ready form (breakdown_rank<R>.json holds it under "trace")."""
        return asdict(self)


def trace_breakdown(trace: dict, *, steps: Sequence[int] | None = None) -> TraceBreakdown:
    """Reduce one rank's trace over its profiled steps (all ProfilerStep#N windows, or `steps`)."""
    events = trace["traceEvents"]
    device_trace = any(e.get("cat") == "kernel" for e in events)
    windows = step_windows(trace)
    device_spans = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if device_trace and classify(e, device_trace=True)
    ]
    if not windows and device_spans and steps is not None:
        # a device-only trace (no host ops, so no step marks): the steps are the profiler's schedule and
        # the window the device's work from its first event to its last
        chosen = sorted(steps)
        window = [(min(s for s, _ in device_spans), max(e for _, e in device_spans))]
    else:
        chosen = sorted(windows if steps is None else [s for s in steps if s in windows])
        if not chosen:
            raise ValueError(
                f"the trace has no ProfilerStep window for steps {list(steps or [])}; it has {sorted(windows)}"
            )
        # from the first chosen step's start to the last one's end, like the timers' summed step_s
        # (device-side step marks leave the gaps between steps out of every single step)
        window = [(min(windows[s][0] for s in chosen), max(windows[s][1] for s in chosen))]
        if device_spans and not any(e.get("cat") == "gpu_user_annotation" for e in events):
            # no device-side step marks: the device work of the window is what ran on it in between
            window = [(min(s for s, _ in device_spans), max(e for _, e in device_spans))]
    by_class: dict[str, list[Interval]] = {c: [] for c in CLASSES}
    by_compute: dict[str, list[Interval]] = {"conv": [], "gemm": [], "other_compute": []}
    by_collective: dict[str, list[Interval]] = {}
    h2d: list[Interval] = []
    for event in events:
        kind = classify(event, device_trace=device_trace)
        if kind is None:
            continue
        start = float(event["ts"])
        span = (start, start + float(event.get("dur", 0)))
        by_class[kind].append(span)
        name = event.get("name", "")
        if kind == "compute":
            by_compute[compute_kind(name) if device_trace else "other_compute"].append(span)
        elif kind == "communication":
            by_collective.setdefault(collective_name(name), []).append(span)
        elif kind == "memcpy" and H2D_PATTERN.search(name):
            h2d.append(span)
    clip = lambda intervals: intersect(union(intervals), window)  # noqa: E731
    compute = clip(by_class["compute"])
    copies = subtract(clip(by_class["memcpy"] + by_class["memset"]), compute)
    comm = clip(by_class["communication"])
    work = union(compute + copies)
    gaps = subtract(window, work)
    if device_trace:
        overlap = length(intersect(comm, work))
        exposed = length(comm) - overlap
    else:
        # the host thread that waits for its collectives is idle from the moment it blocks until it
        # runs again, which includes handing the result back after gloo's transfer annotation closed
        # (ms on a busy machine): a gap that meets a collective is exposed communication as a whole.
        # It resumes only once they are all done, so an annotation still open then (gloo's thread,
        # descheduled, closes it late) is cut there.
        waits = [g for g in gaps if intersect([g], comm)]
        comm = clip(_cut_at_resume(by_class["communication"], waits))
        overlap = length(intersect(comm, work))
        exposed = length(waits)
    us = 1e-6
    # compute kinds overlap where kernels run concurrently: each kind gets what no earlier kind covers,
    # so conv + gemm + other_compute = compute
    kinds, covered = {}, []
    for name, spans in by_compute.items():
        mine = subtract(clip(spans), covered)
        kinds[name] = length(mine) * us
        covered = union(covered + mine)
    collectives, collectives_exposed = {}, {}
    for name, spans in sorted(by_collective.items()):
        mine = clip(spans) if device_trace else clip(_cut_at_resume(spans, waits))
        collectives[name] = length(mine) * us
        # device: the part no compute or copy hides; host: the waits it meets
        collectives_exposed[name] = (
            length(subtract(mine, work) if device_trace else [w for w in waits if intersect([w], mine)]) * us
        )
    return TraceBreakdown(
        window_s=length(window) * us,
        compute_s=length(compute) * us,
        memcpy_s=length(copies) * us,
        comm_total_s=length(comm) * us,
        comm_overlap_s=overlap * us,
        comm_exposed_s=exposed * us,
        idle_s=(length(gaps) - exposed) * us,
        steps=chosen,
        conv_s=kinds["conv"],
        gemm_s=kinds["gemm"],
        other_compute_s=kinds["other_compute"],
        h2d_s=length(intersect(union(h2d), copies)) * us,
        collectives_s=collectives,
        collectives_exposed_s=collectives_exposed,
    )


def _cut_at_resume(intervals: list[Interval], waits: list[Interval]) -> list[Interval]:
    """End every interval that is open when a wait ends at that wait's end."""
    out = []
    for start, end in intervals:
        for wait_start, wait_end in waits:
            if start < wait_end < end and wait_start < end:
                end = wait_end
                break
        out.append((start, end))
    return out
