"""The profiler window (run.profile_steps=[first, last]): a torch.profiler trace per rank of those
global steps, written to <run dir>/trace/rank<R>.pt.trace.json.gz when the window closes.

The trace is reduced by analysis/breakdown.py (kernel classes, interval union for overlap) and set
beside the phase timers of the same steps. Outside the window the profiler is stopped, so the
measured steps before and after it pay nothing; steps inside it are slower, so they are logged with
profiled=true and left out of the throughput (benchmarks/rundir.py), as is the trace export.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.errors import ConfigError

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

    def __init__(self, *, first: int, last: int, path: Path, device: torch.device) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        self.path = path
        self.first, self.last = first, last
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
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

    def _export(self, prof) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(self.path))  # .gz: torch writes it compressed
        self.written = True

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


def make_profiler(profile_steps: Sequence[int] | None, *, total_steps: int, run_dir: Path, rank: int,
                  device: torch.device) -> StepProfiler | None:
    window = check_window(profile_steps, total_steps=total_steps)
    if window is None:
        return None
    return StepProfiler(first=window[0], last=window[1], path=trace_path(run_dir, rank), device=device)
