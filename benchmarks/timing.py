"""Per-step phase timers: CUDA events on GPU (read two steps late, no per-phase host sync),
perf_counter on CPU (where every op is synchronous to the host anyway)."""

from __future__ import annotations

import time
from collections import deque

import torch

PHASES = ("data", "fwd", "bwd", "opt")


class CpuStepTimer:
    def __init__(self) -> None:
        self._marks: list[float] = []
        self._ready: list[dict[str, float]] = []

    def start_step(self) -> None:
        self._marks = [time.perf_counter()]

    def mark(self) -> None:
        """End of the next phase in PHASES order."""
        self._marks.append(time.perf_counter())

    def cancel_step(self) -> None:
        self._marks = []

    def end_step(self) -> None:
        m = self._marks
        record = {f"{phase}_s": m[i + 1] - m[i] for i, phase in enumerate(PHASES)}
        record["step_s"] = m[-1] - m[0]
        self._ready.append(record)

    def pop_ready(self) -> list[dict[str, float]]:
        ready, self._ready = self._ready, []
        return ready

    def flush(self) -> list[dict[str, float]]:
        return self.pop_ready()


class CudaStepTimer:
    """Events recorded on the current stream; a step's times are read once it is `lag` steps old,
    by which time its events have completed (or waiting on them bounds the queue, which is harmless)."""

    def __init__(self, device: torch.device, *, lag: int = 2) -> None:
        self.device, self.lag = device, lag
        self._pending: deque[list[torch.cuda.Event]] = deque()
        self._current: list[torch.cuda.Event] = []
        # reuse event objects: creating events per step costs more than recording them
        self._pool: list[torch.cuda.Event] = []

    def _event(self) -> torch.cuda.Event:
        event = self._pool.pop() if self._pool else torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def start_step(self) -> None:
        self._current = [self._event()]

    def mark(self) -> None:
        self._current.append(self._event())

    def cancel_step(self) -> None:
        self._pool.extend(self._current)
        self._current = []

    def end_step(self) -> None:
        self._pending.append(self._current)
        self._current = []

    def _read(self, events: list[torch.cuda.Event]) -> dict[str, float]:
        events[-1].synchronize()
        record = {f"{phase}_s": events[i].elapsed_time(events[i + 1]) / 1e3 for i, phase in enumerate(PHASES)}
        record["step_s"] = events[0].elapsed_time(events[-1]) / 1e3
        self._pool.extend(events)
        return record

    def pop_ready(self) -> list[dict[str, float]]:
        ready = []
        while len(self._pending) > self.lag:
            ready.append(self._read(self._pending.popleft()))
        return ready

    def flush(self) -> list[dict[str, float]]:
        ready = []
        while self._pending:
            ready.append(self._read(self._pending.popleft()))
        return ready


def make_step_timer(device: torch.device) -> CpuStepTimer | CudaStepTimer:
    return CudaStepTimer(device) if device.type == "cuda" else CpuStepTimer()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
