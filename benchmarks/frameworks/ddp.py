"""PyTorch DistributedDataParallel: NCCL on GPU, gloo on CPU."""

from __future__ import annotations

import time
from collections import deque
from typing import ClassVar

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from benchmarks.adapter_config import Installation
from benchmarks.frameworks.base import CommTimer
from benchmarks.frameworks.configs import DDPConfig
from benchmarks.frameworks.torch_collectives import ScaledStep, TorchCollectives
from benchmarks.optim import constructor_settings


class AllreduceTimer:
    """DDP comm hook that all-reduces each gradient bucket (as DDP's default hook does) and times it.

    Stamps per bucket: `ready` when the hook is called (on GPU an event on the compute stream: the
    bucket's gradients are computed), `queued` once the all-reduce is enqueued (CPU only: gloo's
    enqueue takes host time; on GPU it is the same stream position as `ready`), and `done` in the
    future's callback (on GPU an event on the callback's stream, which PyTorch orders after the NCCL
    kernel); per step one more, `end`, when backward returns (on GPU an event on the compute stream,
    which DDP made wait for the last bucket).
    comm_s: the union of the [ready, done] intervals. NCCL runs a rank's buckets one after another,
    so this is the time the collective is busy or queued.
    comm_exposed_s: end - the last `queued`: backward's compute is over, the rank only waits for its
    collectives (on CPU including the hand-back of the result to the waiting thread).
    On GPU no event is read before the loop reads the step's own events (two steps late), so the
    hook adds no host sync; on CPU (gloo) the stamps are perf_counter wall times.
    """

    # step_comm_s() is called when the loop reads a step's times, once per step, oldest step first
    reads_late: ClassVar[bool] = True

    def __init__(self, *, device: torch.device, world_size: int) -> None:
        self.cuda = device.type == "cuda"
        self.world_size = world_size
        self._current: list[list] = []
        self._steps: deque[tuple[list[list], object]] = deque()
        self._pool: deque[torch.cuda.Event] = deque()  # events are reused: creating them costs more

    def _stamp(self):
        if not self.cuda:
            return time.perf_counter()
        event = self._pool.pop() if self._pool else torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def begin_step(self) -> None:
        self._current = []

    def end_step(self) -> None:
        self._steps.append((self._current, self._stamp()))

    def hook(self, state, bucket):  # no annotations: register_comm_hook checks them literally
        buffer = bucket.buffer()
        buffer.div_(self.world_size)
        stamps = [self._stamp(), None, None]  # ready, done, queued
        self._current.append(stamps)
        future = dist.all_reduce(buffer, async_op=True).get_future()
        stamps[2] = stamps[0] if self.cuda else time.perf_counter()

        def done(fut):
            stamps[1] = self._stamp()
            return fut.value()[0]

        return future.then(done)

    def step_comm_s(self) -> tuple[float | None, float | None]:
        if not self._steps:
            return None, None
        stamps, end = self._steps.popleft()
        if not stamps or any(done is None for _, done, _ in stamps):
            return None, None
        if self.cuda:
            end.synchronize()  # complete already: the loop read this step's later events first
            reference = stamps[0][0]
            seconds = lambda event: reference.elapsed_time(event) / 1e3  # noqa: E731
            times = [(seconds(ready), seconds(done), seconds(ready)) for ready, done, _ in stamps]
            end_s = seconds(end)
            self._pool.extend(event for ready, done, _ in stamps for event in (ready, done))
            self._pool.append(end)
        else:
            times, end_s = stamps, end
        return comm_total_exposed(times, end_s=end_s)


def comm_total_exposed(stamps: list, *, end_s: float) -> tuple[float, float]:
    """(length of the union of the [ready, done] intervals, end_s - the last queued, clipped at 0)."""
    total = 0.0
    covered = float("-inf")
    for start, stop, _ in sorted(stamps):
        if stop <= covered:
            continue
        total += stop - max(start, covered)
        covered = stop
    return total, max(0.0, end_s - max(queued for _, _, queued in stamps))


def zero_redundancy(optimizer: torch.optim.Optimizer) -> ZeroRedundancyOptimizer:
    """The same optimizer (class and settings) as a ZeroRedundancyOptimizer over the same parameters: each
    rank updates its shard of them and broadcasts it (needs the process group; one param group)."""
    (group,) = optimizer.param_groups  # components.build_model_and_optimizer makes one
    return ZeroRedundancyOptimizer(group["params"], optimizer_class=type(optimizer), **constructor_settings(optimizer))


class DDP(ScaledStep, TorchCollectives):
    name: ClassVar[str] = "ddp"

    def __init__(self, config: DDPConfig) -> None:
        config.check()
        self.config = config
        self.backend = config.backend  # "auto" until init() knows the device
        self.wrapped = False
        self._comm: AllreduceTimer | None = None
        self.rank = self.local_rank = 0
        self.world_size = 1
        self._optimizer: torch.optim.Optimizer | None = None
        self._scaler: torch.amp.GradScaler | None = None

    @classmethod
    def installation(cls) -> Installation:
        backends = [name for name, ok in (("nccl", dist.is_nccl_available()), ("gloo", dist.is_gloo_available())) if ok]
        ok = dist.is_available() and bool(backends)
        return Installation(
            ok=ok,
            detail=f"torch.distributed {torch.__version__}: {', '.join(backends) or 'no backend'}",
            fix="" if ok else "install a torch build with distributed support (pip install torch)",
        )

    def setup(self, model, optimizer, *, amp_dtype):
        # float16 gradients underflow without dynamic loss scaling; bfloat16 needs none
        self._scaler = torch.amp.GradScaler(self.device.type) if amp_dtype == torch.float16 else None
        if self.config.zero_optimizer:
            optimizer = zero_redundancy(optimizer)
        self._optimizer = optimizer
        if self.world_size == 1 and not self.config.wrap_single_rank:
            # one rank has nothing to all-reduce: the wrapper would only add bucket copies
            return model, optimizer
        self.wrapped = True
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        wrapped = DistributedDataParallel(
            model,
            device_ids=device_ids,
            bucket_cap_mb=self.config.bucket_cap_mb,
            gradient_as_bucket_view=self.config.gradient_as_bucket_view,
            static_graph=self.config.static_graph,
            find_unused_parameters=self.config.find_unused_parameters,
        )
        if self.config.comm_timer.enabled(self.device.type):
            self._comm = AllreduceTimer(device=self.device, world_size=self.world_size)
            wrapped.register_comm_hook(state=None, hook=self._comm.hook)
        return wrapped, optimizer

    def backward(self, loss: torch.Tensor) -> None:
        # DDP's hooks all-reduce gradient buckets during backward; the last bucket is waited for here
        if self._comm is not None:
            self._comm.begin_step()
        self.scaled_backward(loss)
        if self._comm is not None:
            self._comm.end_step()

    def release(self) -> None:
        # shutdown() (TorchCollectives: barrier, release, destroy): the comm hook's state, the optimizer
        self._comm = None
        self._optimizer = None
        self._scaler = None

    def comm_timer(self) -> CommTimer | None:
        return self._comm  # None when not wrapped (world size 1) or not timed (framework.comm_timer)

    def describe(self) -> dict:
        return {
            "framework": self.name,
            "backend": self.backend,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            "bucket_cap_mb": self.config.bucket_cap_mb,
            "gradient_as_bucket_view": self.config.gradient_as_bucket_view,
            "static_graph": self.config.static_graph,
            "ddp_wrapped": self.wrapped,  # False at world size 1 unless wrap_single_rank
            "zero_optimizer": self.config.zero_optimizer,
            "comm_timer": "allreduce comm hook (total: union of bucket intervals; exposed: last done - last ready)"
            if self._comm is not None
            else None,
        }
