"""The profiler window: a torch.profiler trace per rank of a few global steps, reduced on the rank to
<run dir>/breakdown_rank<R>.json (benchmarks/tracereduce.py: kernel classes, interval union for overlap).

Two ways to get one:
- the sampled window (run.trace=auto: on for GPU runs): run.trace_steps steps added AFTER the measured
  ones (plus the profiler's own warm-up step before them), on every rank. At the end, so that no
  measured step waits for a rank that is still writing its trace; the raw trace is deleted once
  reduced unless run.keep_trace=true;
- an explicit window (run.profile_steps=[first, last]) inside the run's steps; its raw trace
  (<run dir>/trace/rank<R>.pt.trace.json.gz) is kept, for HTA, Perfetto or TensorBoard.
Steps the profiler covers are slower, so they are logged with profiled=true and left out of the
throughput (benchmarks/rundir/), as is the trace export; outside the window the profiler does not run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks import tracereduce
from benchmarks.errors import ConfigError
from benchmarks.rundir import run_files

TRACE_DIR = "trace"


def trace_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / TRACE_DIR / f"rank{rank}.pt.trace.json.gz"


def check_window(profile_steps: Sequence[int] | None, *, total_steps: int) -> tuple[int, int] | None:
    """[first, last] -> (first, last) within the run's steps, or None when profiling is off."""
    if profile_steps is None:
        return None
    window = list(profile_steps)
    if len(window) != 2 or not all(isinstance(s, int) for s in window) or not 0 <= window[0] <= window[1] < total_steps:
        raise ConfigError(
            f"run.profile_steps={window} must be [first, last] global step indexes with "
            f"0 <= first <= last < {total_steps} (warm-up + measured steps); e.g. run.profile_steps=[3,5]"
        )
    return window[0], window[1]


class StepProfiler:
    """torch.profiler over one window of steps; the loop calls step() after every step."""

    def __init__(self, *, first: int, last: int, path: Path, device: torch.device, host_ops: bool = True) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        self.path = path
        self.first, self.last = first, last
        activities = [ProfilerActivity.CUDA] if device.type == "cuda" else []
        if host_ops or not activities:
            activities.insert(0, ProfilerActivity.CPU)
        # one step of profiler warm-up before the window where there is one (CUPTI's start-up costs)
        warmup = 1 if first >= 1 else 0
        self._profile = profile(
            activities=activities,
            schedule=schedule(wait=first - warmup, warmup=warmup, active=last - first + 1, repeat=1),
            on_trace_ready=self._export,
        )
        self._traced_from = first - warmup
        self._step = 0
        self._running = False
        self.written = False
        self.export_s = 0.0  # the trace export's seconds (runtime_s leaves them out)

    def _export(self, prof) -> None:
        start = time.perf_counter()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(self.path))  # .gz: torch writes it compressed
        self.written = True
        self.export_s = time.perf_counter() - start

    def covers(self, step: int) -> bool:
        """Whether the profiler runs during this global step (its warm-up step included): such a step
        is logged with profiled=true and not measured."""
        return self._traced_from <= step <= self.last

    def start(self) -> None:
        """Right before the first step: ProfilerStep#k then annotates global step k."""
        self._profile.start()
        self._running = True

    def step(self) -> None:
        if not self._running:
            return
        self._profile.step()
        self._step += 1
        if self._step > self.last:
            self.stop()  # the window is written; later steps run without the profiler

    def stop(self) -> None:
        if self._running:
            self._running = False
            self._profile.stop()


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """The profiled steps [first, last] of a run, the steps it adds after the measured ones, and whether the
    raw trace stays once reduced."""

    first: int
    last: int
    extra_steps: int
    keep_trace: bool
    source: str  # "sampled" (run.trace) or "profile_steps"
    # record the host ops too (CPU activity). The sampled window on a GPU records device activity only:
    # its breakdown reads device events alone, and a host that records every op can fall behind a fast
    # GPU, which then idles in the window (ResNet-152 under Horovod: 18% idle with host ops recorded).
    # An explicit window keeps them, for HTA, Perfetto or TensorBoard.
    host_ops: bool = True


def plan_window(run, *, device_type: str, warmup: int, measured: int) -> Window | None:
    """The window for a run's config (cfg.run) and step counts, or None when nothing is traced."""
    if run.profile_steps is not None:
        first, last = check_window(run.profile_steps, total_steps=warmup + measured)
        return Window(first=first, last=last, extra_steps=0, keep_trace=True, source="profile_steps")
    if run.trace_steps < 1 or not run.trace.enabled(device_type):
        return None
    # step warmup + measured is the profiler's warm-up step; the traced ones follow it
    first = warmup + measured + 1
    return Window(
        first=first,
        last=first + run.trace_steps - 1,
        extra_steps=1 + run.trace_steps,
        keep_trace=bool(run.keep_trace),
        source="sampled",
        host_ops=device_type != "cuda",
    )


def make_profiler(window: Window | None, *, run_dir: Path, rank: int, device: torch.device) -> StepProfiler | None:
    if window is None:
        return None
    return StepProfiler(
        first=window.first, last=window.last, path=trace_path(run_dir, rank), device=device, host_ops=window.host_ops
    )


def reduce_trace(window: Window, *, run_dir: Path, rank: int) -> Path:
    """Reduce this rank's trace of the window to breakdown_rank<R>.json (and delete the raw trace unless
    it is kept). Runs after the last step: its time is in no measured step."""
    start = time.perf_counter()
    raw = trace_path(run_dir, rank)
    # a device-only trace has no ProfilerStep marks: the window's steps are the profiler's schedule
    breakdown = tracereduce.trace_breakdown(tracereduce.read_trace(raw), steps=range(window.first, window.last + 1))
    out = tracereduce.breakdown_path(run_dir, rank)
    run_files.write_json_atomic(
        out,
        {
            "schema_version": tracereduce.BREAKDOWN_SCHEMA_VERSION,
            "rank": rank,
            "source": window.source,
            "window_steps": [window.first, window.last],
            "reduce_s": time.perf_counter() - start,
            "raw_trace": raw.name if window.keep_trace else None,
            "trace": breakdown.record(),
        },
    )
    if not window.keep_trace:
        raw.unlink()  # the shared trace/ folder stays until every rank is past this (remove_trace_dir)
    return out


def remove_trace_dir(run_dir: Path) -> None:
    """Rank 0, once every rank has reduced and deleted its raw trace (after a barrier): the ranks' shared
    trace/ folder, if empty. A rank that removed it as soon as its own trace was gone could do so before a
    slower rank had exported into it, which then failed on a missing file (seen under load on 2 cores)."""
    with contextlib.suppress(OSError):  # not empty: a kept trace, or files someone else put there
        (Path(run_dir) / TRACE_DIR).rmdir()
