"""The sharding contract every loader follows.

Over one epoch the union of all ranks' samples is the dataset, the ranks' samples are disjoint, and
every rank runs the same number of steps (so no collective waits for a rank that ran out of data).
"""

from __future__ import annotations

import torch

from benchmarks.errors import ConfigError


def epoch_permutation(num_samples: int, *, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """The global sample order of one epoch: identical on every rank for the same seed and epoch."""
    if not shuffle:
        return list(range(num_samples))
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    return torch.randperm(num_samples, generator=generator).tolist()


def shard_batches(order: list[int], *, rank: int, world_size: int, per_gpu_batch: int) -> list[list[int]]:
    """Split one epoch's global order into this rank's batches.

    Global step k takes order[k*W*B:(k+1)*W*B] and rank r its slice [r*B:(r+1)*B], so W ranks at batch
    B see exactly what one rank sees at batch W*B. The final partial global batch is split as evenly
    as possible; if it is smaller than W (some ranks would get nothing) its samples are appended to
    the previous step instead, one per rank. Steps per rank are therefore equal and no sample is lost
    or repeated.
    """
    num_samples = len(order)
    if num_samples < world_size:
        raise ConfigError(
            f"dataset has {num_samples} samples but world size is {world_size}; use a larger dataset or fewer ranks"
        )
    global_batch = world_size * per_gpu_batch
    num_full, tail = divmod(num_samples, global_batch)
    batches = [
        order[k * global_batch + rank * per_gpu_batch : k * global_batch + (rank + 1) * per_gpu_batch]
        for k in range(num_full)
    ]
    tail_order = order[num_full * global_batch :]
    if tail == 0:
        return batches
    if tail >= world_size:
        # sizes differ by at most one: the first `extra` ranks take one more sample
        base, extra = divmod(tail, world_size)
        start = rank * base + min(rank, extra)
        batches.append(tail_order[start : start + base + (1 if rank < extra else 0)])
    elif rank < tail:
        batches[-1] = batches[-1] + [tail_order[rank]]
    return batches


def short_last_step(num_samples: int, *, world_size: int, per_gpu_batch: int) -> int | None:
    """Samples per rank in each epoch's last, partial step; None when every step is whole (or when the
    few leftover samples are appended to the previous step, see shard_batches)."""
    tail = num_samples % (world_size * per_gpu_batch)
    return tail // world_size if tail >= world_size else None


VAL_SPLIT_SEED = 1234  # the held-out split's own seed: the same split in every run, whatever run.seed


def validation_split(num_samples: int, share: float) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(training indices, validation indices) of a data set: round(share x N) samples held out by a fixed
    permutation, both sorted. Every run of a data set gets the same split."""
    import random

    held = round(share * num_samples)
    order = list(range(num_samples))
    random.Random(VAL_SPLIT_SEED).shuffle(order)
    return tuple(sorted(order[held:])), tuple(sorted(order[:held]))
