"""The DDP comm hook's GPU path without a GPU: fake CUDA events on a fake clock, a fake all-reduce."""

from __future__ import annotations

import pytest
import torch

from benchmarks.frameworks import ddp as ddp_module
from benchmarks.frameworks.ddp import AllreduceTimer


class Clock:
    now = 0.0


class FakeEvent:
    created = 0

    def __init__(self, enable_timing: bool = False) -> None:
        FakeEvent.created += 1
        self.t: float | None = None

    def record(self) -> None:
        self.t = Clock.now

    def synchronize(self) -> None:
        assert self.t is not None

    def elapsed_time(self, other: FakeEvent) -> float:
        return (other.t - self.t) * 1e3  # ms, like CUDA


class FakeBucket:
    def __init__(self, n: int) -> None:
        self._buffer = torch.ones(n)

    def buffer(self) -> torch.Tensor:
        return self._buffer


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    calls = []

    def all_reduce(tensor, async_op=False):
        calls.append(tensor.numel())
        Clock.now += 0.004  # the transfer: 4 ms, finished when the callback runs
        fut = torch.futures.Future()
        fut.set_result([tensor])
        return type("Work", (), {"get_future": lambda self: fut})()

    monkeypatch.setattr(ddp_module.dist, "all_reduce", all_reduce)
    Clock.now, FakeEvent.created = 0.0, 0
    return calls


def one_step(timer: AllreduceTimer, *, buckets: int, compute_s: float, tail_s: float) -> None:
    timer.begin_step()
    for _ in range(buckets):
        Clock.now += compute_s  # backward computes the next bucket
        out = timer.hook(None, FakeBucket(4)).wait()
        assert torch.equal(out, torch.full((4,), 0.5))  # divided by the world size, as DDP's hook does
    Clock.now += tail_s  # the wait for the last bucket after compute ended
    timer.end_step()


def test_gpu_path_reads_late_and_reuses_events(fake_cuda):
    timer = AllreduceTimer(device=torch.device("cuda", 0), world_size=2)
    assert timer.reads_late
    for _ in range(3):
        one_step(timer, buckets=3, compute_s=0.010, tail_s=0.002)
    # nothing was read yet: the loop asks once per step, oldest first, when it reads the step
    total, exposed = timer.step_comm_s()
    assert total == pytest.approx(3 * 0.004)
    assert exposed == pytest.approx(0.004 + 0.002)  # end - the last ready (= queued on GPU)
    created = FakeEvent.created
    one_step(timer, buckets=3, compute_s=0.010, tail_s=0.0)
    assert FakeEvent.created == created  # the read step's 7 events were reused
    assert [timer.step_comm_s() for _ in range(3)][-1] == pytest.approx((0.012, 0.004))
    assert timer.step_comm_s() == (None, None)  # no step left
    assert fake_cuda == [4] * 12


def test_cpu_path_uses_wall_time(fake_cuda, monkeypatch):
    monkeypatch.setattr(ddp_module.time, "perf_counter", lambda: Clock.now)
    timer = AllreduceTimer(device=torch.device("cpu"), world_size=2)
    one_step(timer, buckets=2, compute_s=0.010, tail_s=0.001)
    total, exposed = timer.step_comm_s()
    assert total == pytest.approx(0.008)
    # on CPU the enqueue (here the whole fake transfer) is host time before `queued`
    assert exposed == pytest.approx(0.001)
