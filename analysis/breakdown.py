"""Where the time goes, from two sources that must agree: the always-on phase timers (rank<R>.jsonl)
and a profiler-trace window (trace/rank<R>.pt.trace.json.gz) classified by kernel.

Trace reduction: every device event (GPU trace) or host op (CPU trace) is put in one class:
communication (NCCL kernels, gloo collectives), compute, memcpy, memset; within the profiled steps
the union of each class is taken, overlap is the intersection of communication with the rest,
exposed communication = communication - overlap (GPU) or, on the host, every gap in the work that
meets a collective (the waiting thread idles until the result is handed back), idle = the rest.
Shares of the window: compute + memcpy + comm_exposed + idle = 1 (comm_total is overlapped).

Timer breakdown of the same steps: data = data_s, comm_exposed = comm_exposed_s,
compute = fwd_s + bwd_s + opt_s - comm_exposed_s, other = step_s - the phases; comm_total = comm_s.
Agreement pairs: compute <-> compute + memcpy, comm_exposed <-> comm_exposed, data + other <-> idle,
comm_total <-> comm_total; the largest difference, in percentage points, is the disagreement.

Why by hand and not Holistic Trace Analysis (HTA, analysis/breakdown_hta.py runs it where it is
installed, as a cross-check): HTA is built around GPU kernels; on our CPU/gloo traces its temporal
breakdown and idle-time breakdown raise, comm/comp overlap is NaN and the kernel breakdown is empty
(checked with holistictraceanalysis 0.5.0 and torch 2.14, see docs/breakdown.md), so the CPU tests
could not check anything through it. It also has no notion of our phase timers, and it pulls ~90
packages (jupyterlab, plotly). The interval arithmetic below is ~100 lines, works on CPU and GPU
traces, and on GPU traces is the same reduction as HTA's comm/comp overlap.

Pure functions (dicts/lists in, dataclasses out) plus two readers; no plotting.
"""
from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

Interval = tuple[float, float]

# NCCL kernels on GPU (only those: compute kernels' template names hold words like "broadcast");
# on CPU gloo's transfer annotations and the c10d ops that enqueue them
DEVICE_COMM_PATTERN = re.compile(r"nccl", re.I)
HOST_COMM_PATTERN = re.compile(r"nccl|gloo:|c10d::", re.I)
PROFILER_STEP = re.compile(r"ProfilerStep#(\d+)")
DEVICE_CATEGORIES = {"kernel": "compute", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
CLASSES = ("compute", "communication", "memcpy", "memset")


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
    """Seconds within the window, and shares of it (compute + memcpy + comm_exposed + idle = 1)."""
    window_s: float
    compute_s: float
    memcpy_s: float  # memcpy and memset not under compute
    comm_total_s: float
    comm_overlap_s: float
    comm_exposed_s: float
    idle_s: float
    steps: list[int]

    def shares(self) -> dict[str, float]:
        w = self.window_s or float("nan")
        return {"compute": self.compute_s / w, "memcpy": self.memcpy_s / w, "comm_exposed": self.comm_exposed_s / w,
                "idle": self.idle_s / w, "comm_total": self.comm_total_s / w}


def trace_breakdown(trace: dict, *, steps: Sequence[int] | None = None) -> TraceBreakdown:
    """Reduce one rank's trace over its profiled steps (all ProfilerStep#N windows, or `steps`)."""
    events = trace["traceEvents"]
    device_trace = any(e.get("cat") == "kernel" for e in events)
    windows = step_windows(trace)
    chosen = sorted(windows if steps is None else [s for s in steps if s in windows])
    if not chosen:
        raise ValueError(f"the trace has no ProfilerStep window for steps {list(steps or [])}; it has {sorted(windows)}")
    # from the first chosen step's start to the last one's end, like the timers' summed step_s
    # (device-side step marks leave the gaps between steps out of every single step)
    window = [(min(windows[s][0] for s in chosen), max(windows[s][1] for s in chosen))]
    if device_trace and not any(e.get("cat") == "gpu_user_annotation" for e in events):
        # no device-side step marks: the device work of the window is what ran on it in between
        spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
                 if classify(e, device_trace=True)]
        window = union([(min(s for s, _ in spans), max(e for _, e in spans))]) if spans else window
    by_class: dict[str, list[Interval]] = {c: [] for c in CLASSES}
    for event in events:
        kind = classify(event, device_trace=device_trace)
        if kind is not None:
            start = float(event["ts"])
            by_class[kind].append((start, start + float(event.get("dur", 0))))
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
    return TraceBreakdown(
        window_s=length(window) * us, compute_s=length(compute) * us, memcpy_s=length(copies) * us,
        comm_total_s=length(comm) * us, comm_overlap_s=overlap * us,
        comm_exposed_s=exposed * us, idle_s=(length(gaps) - exposed) * us, steps=chosen,
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


# --- the phase timers --------------------------------------------------------------------------

@dataclass(slots=True, kw_only=True)
class TimerBreakdown:
    """Sums over the chosen steps (seconds), and shares of step_s (data + compute + comm_exposed + other = 1)."""
    step_s: float
    data_s: float
    compute_s: float
    comm_total_s: float | None  # None: the framework does not time its collectives
    comm_exposed_s: float
    other_s: float
    steps: list[int]

    def shares(self) -> dict[str, float]:
        w = self.step_s or float("nan")
        return {"data": self.data_s / w, "compute": self.compute_s / w, "comm_exposed": self.comm_exposed_s / w,
                "other": self.other_s / w,
                "comm_total": float("nan") if self.comm_total_s is None else self.comm_total_s / w}


def timer_breakdown(records: Iterable[dict], *, steps: Sequence[int] | None = None) -> TimerBreakdown:
    """Step records (rank<R>.jsonl lines) -> the breakdown over `steps` (default: the measured ones)."""
    wanted = None if steps is None else set(steps)
    rows = [r for r in records if "step_s" in r and
            (r["step"] in wanted if wanted is not None else not r.get("warmup", False))]
    if not rows:
        raise ValueError(f"no step record for steps {sorted(wanted) if wanted else 'measured'}")
    total = lambda key: sum(float(r.get(key) or 0.0) for r in rows)  # noqa: E731
    phases = total("fwd_s") + total("bwd_s") + total("opt_s")
    exposed = total("comm_exposed_s")
    has_comm = any(r.get("comm_s") is not None for r in rows)
    return TimerBreakdown(
        step_s=total("step_s"), data_s=total("data_s"), compute_s=phases - exposed,
        comm_total_s=total("comm_s") if has_comm else None, comm_exposed_s=exposed,
        other_s=total("step_s") - total("data_s") - phases, steps=sorted(r["step"] for r in rows),
    )


def read_step_records(path: Path) -> list[dict]:
    """The step lines of a rank<R>.jsonl (the header and other kinds left out)."""
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if "step" in r and "kind" not in r]


# --- agreement ---------------------------------------------------------------------------------

def compare(timer: TimerBreakdown, trace: TraceBreakdown) -> dict[str, tuple[float, float]]:
    """Category -> (timer share, trace share), for the categories both sources measure."""
    t, g = timer.shares(), trace.shares()
    pairs = {
        "compute": (t["compute"], g["compute"] + g["memcpy"]),
        "comm_exposed": (t["comm_exposed"], g["comm_exposed"]),
        "data+other/idle": (t["data"] + t["other"], g["idle"]),
    }
    if timer.comm_total_s is not None:
        pairs["comm_total"] = (t["comm_total"], g["comm_total"])
    return pairs


def disagreement_pp(pairs: dict[str, tuple[float, float]]) -> float:
    """The largest |timer - trace| over the categories, in percentage points."""
    return max(abs(a - b) for a, b in pairs.values()) * 100


def run_breakdown(run_dir: Path, rank: int = 0) -> tuple[TimerBreakdown, TraceBreakdown, dict[str, tuple[float, float]]]:
    """Timer and trace breakdown of one rank of a run with run.profile_steps, over the profiled steps."""
    run_dir = Path(run_dir)
    trace = trace_breakdown(read_trace(run_dir / "trace" / f"rank{rank}.pt.trace.json.gz"))
    timer = timer_breakdown(read_step_records(run_dir / f"rank{rank}.jsonl"), steps=trace.steps)
    return timer, trace, compare(timer, trace)


def format_side_by_side(timer: TimerBreakdown, trace: TraceBreakdown, pairs: dict[str, tuple[float, float]]) -> str:
    lines = [f"steps {trace.steps[0]}..{trace.steps[-1]}: timers {timer.step_s * 1e3:.1f} ms, trace window {trace.window_s * 1e3:.1f} ms",
             f"{'category':<18}{'timers':>9}{'trace':>9}{'diff pp':>9}"]
    for name, (a, b) in pairs.items():
        lines.append(f"{name:<18}{a:>9.1%}{b:>9.1%}{(a - b) * 100:>+9.1f}")
    lines.append(f"agreement: max |diff| = {disagreement_pp(pairs):.1f} pp (goal <= 5)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="timer vs trace breakdown of a run with run.profile_steps")
    parser.add_argument("run_dir")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    timer, trace, pairs = run_breakdown(Path(args.run_dir), args.rank)
    if args.json:
        print(json.dumps({"timer": asdict(timer), "trace": asdict(trace), "pairs": pairs,
                          "disagreement_pp": disagreement_pp(pairs)}))
    else:
        print(format_side_by_side(timer, trace, pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
