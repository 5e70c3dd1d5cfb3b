"""Synthetic batches pre-built on the device: the no-I/O baseline of the Stash stall analysis, and the data
of the tasks that have no data set here (question answering, detection): each task makes its own samples
(benchmarks/tasks/)."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks.adapter_config import Installation
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import SyntheticLoaderConfig
from benchmarks.loaders.sharding import shard_batches
from benchmarks.tasks import classification
from benchmarks.tasks.base import Batch


class SyntheticEpoch:
    def __init__(self, ctx: LoaderContext, *, num_batches: int, samples_per_epoch: int) -> None:
        self.ctx = ctx
        self.num_samples = samples_per_epoch
        order = list(range(samples_per_epoch))
        self._num_steps = len(
            shard_batches(order, rank=ctx.rank, world_size=ctx.world_size, per_gpu_batch=ctx.per_gpu_batch)
        )
        # batch j of rank r holds the same samples as batch j of a 1-rank run at W*B, sliced
        global_batch = ctx.world_size * ctx.per_gpu_batch
        make = classification.synthetic_batch if ctx.task is None else ctx.task.synthetic_batch
        self.batches = []
        for j in range(num_batches):
            first = j * global_batch + ctx.rank * ctx.per_gpu_batch
            self.batches.append(make(range(first, first + ctx.per_gpu_batch), ctx))

    def __len__(self) -> int:
        return self._num_steps

    def __iter__(self) -> Iterator[Batch]:
        for step in range(self._num_steps):
            yield self.batches[step % len(self.batches)]

    def set_epoch(self, epoch: int) -> None:
        pass  # the same batches every epoch: there is nothing to shuffle

    def describe(self) -> dict:
        return {"loader": "synthetic", "num_batches": len(self.batches), "samples_per_epoch": self.num_samples}


class SyntheticLoader:
    @classmethod
    def installation(cls) -> Installation:
        return Installation(ok=True, detail="built in (tensors made on the device)")

    def __init__(self, config: SyntheticLoaderConfig) -> None:
        config.check()
        self.config = config

    def build(self, ctx: LoaderContext) -> SyntheticEpoch:
        return SyntheticEpoch(ctx, num_batches=self.config.num_batches, samples_per_epoch=self.config.samples_per_epoch)
