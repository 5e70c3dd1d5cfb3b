"""What the loop asks of a task: its synthetic batches, its loss, the samples in a batch and their unit."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import torch

from benchmarks.models.configs import TaskKind

# a batch as the loader yields it, already on the device: (images, labels), a dict of token tensors, ...
Batch = Any


class SampleContext(Protocol):
    """What a task's synthetic batch reads of the run: loaders.base.LoaderContext has these fields (a task
    names them here instead of importing the loaders, which import the tasks)."""

    device: torch.device
    seed: int
    num_classes: int
    image_size: int
    channels_last: bool


class Task(Protocol):
    """A workload: the loop hands each batch to loss() and counts num_samples() of it; the synthetic loader
    makes its batches with synthetic_batch(). Every other loader yields classification's (images, labels)."""

    kind: ClassVar[TaskKind]
    sample_unit: ClassVar[str]  # models/configs.py SAMPLE_UNITS: "images" or "sequences"

    def synthetic_batch(self, sample_ids: range, ctx: SampleContext) -> Batch:
        """The samples `sample_ids` on ctx.device, each a pure function of (ctx.seed, its id)."""
        ...

    def loss(self, model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        """The forward pass and the scalar training loss (under the caller's autocast)."""
        ...

    def num_samples(self, batch: Batch) -> int: ...

    def describe(self) -> dict:
        """Facts for meta.json: the task, its unit and its data's shape."""
        ...


def generator(seed: int, sample_id: int) -> torch.Generator:
    """The random stream of one synthetic sample: the same on every rank and in every run of the seed."""
    return torch.Generator().manual_seed(seed * 1_000_003 + sample_id)
