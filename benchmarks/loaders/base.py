"""What every loader gives the loop, and what the loop gives every loader."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import torch

from benchmarks.adapter_config import Installation


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


class EpochLoader(Protocol):
    """Yields (images, labels) already on ctx.device; the same len() on every rank."""

    num_samples: int  # the samples one epoch covers over all ranks (the dataset, or synthetic's virtual size)

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]: ...

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
