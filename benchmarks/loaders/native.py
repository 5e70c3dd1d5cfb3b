"""torchvision ImageFolder + DataLoader, written as a careful PyTorch user would.

Workers decode and crop to uint8; the batch travels pinned and non-blocking to the device, where it
is converted to float and normalised (cheaper there than in every worker).

One DataLoader iterator runs across epochs (EpochStream), as DALI's pipeline does: its workers start
the next epoch's batches while training takes this one's last. With a fresh iterator per epoch, the
workers idle at every epoch's end until the slowest has made its batch: on 16 batches per epoch over 15
workers, one worker makes two while fourteen wait, a handicap of the small dataset, not of the loader.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Sampler

from benchmarks.adapter_config import Installation
from benchmarks.errors import ConfigError
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import NativeLoaderConfig
from benchmarks.loaders.sharding import epoch_permutation, shard_batches

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class ShardedBatchSampler(Sampler[list[int]]):
    """This rank's batches of one epoch, by the sharding contract (sharding.shard_batches)."""

    def __init__(self, num_samples: int, *, rank: int, world_size: int, per_gpu_batch: int, seed: int, shuffle: bool):
        self.num_samples, self.rank, self.world_size = num_samples, rank, world_size
        self.per_gpu_batch, self.seed, self.shuffle = per_gpu_batch, seed, shuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of `epoch`."""
        order = epoch_permutation(self.num_samples, seed=self.seed, epoch=epoch, shuffle=self.shuffle)
        return shard_batches(order, rank=self.rank, world_size=self.world_size, per_gpu_batch=self.per_gpu_batch)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches(self.epoch))

    def __len__(self) -> int:
        return len(self.batches(self.epoch))


class SpanningBatchSampler(Sampler[list[int]]):
    """The DataLoader's batch sampler: the batches of epoch `first`, then of first + 1, and on, without end."""

    def __init__(self, epochs: ShardedBatchSampler):
        self.epochs = epochs
        self.first = 0

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.first
        while True:
            yield from self.epochs.batches(epoch)
            epoch += 1


class EpochStream:
    """One DataLoader iterator across epochs: epoch(e) yields e's batches, and the workers have begun e + 1's
    by the time the last is taken. A new iterator (the workers' queued batches dropped) only when the
    epoch asked for is not the one the stream is at: the first, one after an epoch left early, a jump."""

    def __init__(self, loader: DataLoader, spanning: SpanningBatchSampler, batches_per_epoch: int):
        self.loader, self.spanning, self.batches_per_epoch = loader, spanning, batches_per_epoch
        self._iterator: Iterator | None = None
        self._at: int | None = None  # the epoch whose first batch the iterator yields next; None: mid-epoch

    def epoch(self, epoch: int) -> Iterator:
        if self._iterator is None or self._at != epoch:
            self.spanning.first = epoch
            self._iterator = iter(self.loader)  # persistent workers: reset, not restarted
        self._at = None
        for _ in range(self.batches_per_epoch):
            yield next(self._iterator)
        self._at = epoch + 1


def image_transform(image_size: int, *, augment: bool):
    """Train: random resized crop + flip; eval: resize to 256/224 of the size + centre crop. uint8 out."""
    from torchvision import transforms as T

    if augment:
        return T.Compose([T.RandomResizedCrop(image_size), T.RandomHorizontalFlip(), T.PILToTensor()])
    return T.Compose([T.Resize(image_size * 256 // 224), T.CenterCrop(image_size), T.PILToTensor()])


@functools.cache
def _mean_std(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalisation constants on a device, made once (not a host-to-device copy per batch)."""
    return (
        torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1),
        torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1),
    )


def to_model_input(images_u8: torch.Tensor, device: torch.device, *, channels_last: bool) -> torch.Tensor:
    """uint8 (or 0..255 float) NCHW batch -> normalised float32 on the device (shared by the loaders that
    deliver pixels: native, native_gpu)."""
    images = images_u8.to(device, non_blocking=True).float()
    mean, std = _mean_std(device)
    images = (images - mean) / std
    return images.contiguous(memory_format=torch.channels_last) if channels_last else images


class NativeEpoch:
    def __init__(
        self,
        ctx: LoaderContext,
        stream: EpochStream,
        sampler: ShardedBatchSampler,
        num_samples: int,
        config: NativeLoaderConfig,
    ):
        self.ctx, self.stream, self.sampler = ctx, stream, sampler
        self.num_samples, self.config = num_samples, config

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for images, labels in self.stream.epoch(self.sampler.epoch):
            yield (
                to_model_input(images, self.ctx.device, channels_last=self.ctx.channels_last),
                labels.to(self.ctx.device, non_blocking=True),
            )

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    def describe(self) -> dict:
        return {
            "loader": "native",
            "num_samples": self.num_samples,
            "cpu_count": os.cpu_count(),
            **self.config.described(),
        }


def subset(dataset, indices: tuple[int, ...] | None):
    """The samples of `dataset` at `indices` (a validation split), or all of it."""
    if indices is None:
        return dataset
    from torch.utils.data import Subset

    return Subset(dataset, list(indices))


def sharded_dataloader(
    dataset, ctx: LoaderContext, config: NativeLoaderConfig, *, collate_fn=None
) -> tuple[EpochStream, ShardedBatchSampler]:
    """This rank's batches over `dataset` by the sharding contract, from one DataLoader with the native
    settings (workers, pinning, prefetch, timeout) that runs across epochs, and its sampler (set_epoch goes
    there)."""
    sampler = ShardedBatchSampler(
        len(dataset),
        rank=ctx.rank,
        world_size=ctx.world_size,
        per_gpu_batch=ctx.per_gpu_batch,
        seed=ctx.seed,
        shuffle=config.shuffle,
    )
    workers = config.num_workers
    spanning = SpanningBatchSampler(sampler)
    loader = DataLoader(
        dataset,
        batch_sampler=spanning,
        num_workers=workers,
        collate_fn=collate_fn,
        pin_memory=config.pin_memory and ctx.device.type == "cuda",
        persistent_workers=config.persistent_workers and workers > 0,
        prefetch_factor=config.prefetch_factor if workers > 0 else None,
        timeout=config.timeout_s if workers > 0 else 0,
    )
    return EpochStream(loader, spanning, len(sampler)), sampler


class NativeLoader:
    @classmethod
    def installation(cls) -> Installation:
        import torchvision

        return Installation(ok=True, detail=f"torchvision {torchvision.__version__}")

    def __init__(self, config: NativeLoaderConfig) -> None:
        config.check()
        self.config = config

    def build(self, ctx: LoaderContext) -> NativeEpoch:
        from torchvision.datasets import ImageFolder

        if not ctx.data_path or not os.path.isdir(ctx.data_path):
            raise ConfigError(
                f"data.path={ctx.data_path!r} is not a directory; make one with 'ddlbench data synth --out DIR' "
                "and pass data.path=DIR"
            )
        config = ctx.for_split(self.config)
        dataset = ImageFolder(ctx.data_path, transform=image_transform(ctx.image_size, augment=config.augment))
        dataset = subset(dataset, ctx.indices(len(dataset)))
        stream, sampler = sharded_dataloader(dataset, ctx, config)
        return NativeEpoch(ctx, stream, sampler, len(dataset), config)
