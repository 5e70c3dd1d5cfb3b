"""What every loader gives the loop, and what the loop gives every loader."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import torch

from benchmarks.adapter_config import Installation

if TYPE_CHECKING:
    from benchmarks.tasks.base import Batch, Task

C = TypeVar("C")  # a loader's config (benchmarks/loaders/configs.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoaderContext:
    """Everything a loader needs from the run, independent of the loader's own knobs."""

    rank: int
    world_size: int
    device: torch.device
    per_gpu_batch: int
    seed: int
    num_classes: int
    image_size: int
    channels_last: bool
    data_path: str | None  # None for loaders that read nothing (synthetic)
    # data.val_split: the share of data_path held out for validation (sharding.validation_split over the
    # loader's own sorted sample list); the training loader reads the rest, the validation one (validation=
    # True) the held-out part. 0: no split
    holdout: float = 0.0
    validation: bool = False  # a validation loader: no augmentation, no shuffle
    # the run's task (benchmarks/tasks/): the synthetic loader makes its batches with task.synthetic_batch;
    # None: image classification's (images, labels), which every other loader yields
    task: Task | None = None

    def for_split(self, config: C) -> C:
        """A loader's config as this context reads it: augment and shuffle off for validation."""
        if not self.validation:
            return config
        return dataclasses.replace(config, **{k: False for k in ("augment", "shuffle") if hasattr(config, k)})

    def indices(self, num_samples: int) -> tuple[int, ...] | None:
        """The positions of the loader's sample list this context reads (None: all)."""
        if not self.holdout:
            return None
        from benchmarks.loaders.sharding import validation_split

        train, held = validation_split(num_samples, self.holdout)
        return held if self.validation else train


class EpochLoader(Protocol):
    """Yields batches already on ctx.device, (images, labels) or ctx.task's; the same len() on every rank."""

    num_samples: int  # the samples one epoch covers over all ranks (the dataset, or synthetic's virtual size)

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Batch]: ...

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for `epoch` (the same permutation on every rank)."""
        ...

    def describe(self) -> dict:
        """Facts for meta.json (workers, threads, reader, dataset size)."""
        ...


class Loader(Protocol):
    """A loader option from conf/loader/: constructed from its config object, built per run."""

    @classmethod
    def installation(cls) -> Installation:
        """What this loader's library is on this machine (`ddlbench doctor`); never raises."""
        ...

    def build(self, ctx: LoaderContext) -> EpochLoader: ...
