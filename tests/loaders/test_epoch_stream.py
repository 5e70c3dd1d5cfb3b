"""EpochStream: one DataLoader iterator across epochs, each epoch's batches exactly the sharding contract's."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

from benchmarks.loaders.native import EpochStream, ShardedBatchSampler, SpanningBatchSampler


def stream_of(num_samples: int, *, workers: int) -> tuple[EpochStream, ShardedBatchSampler]:
    sampler = ShardedBatchSampler(num_samples, rank=1, world_size=2, per_gpu_batch=4, seed=7, shuffle=True)
    spanning = SpanningBatchSampler(sampler)
    loader = DataLoader(
        list(range(num_samples)),
        batch_sampler=spanning,
        num_workers=workers,
        persistent_workers=workers > 0,
        collate_fn=list,
    )
    return EpochStream(loader, spanning, len(sampler)), sampler


@pytest.mark.parametrize("workers", [0, 2])
def test_each_epoch_is_the_contracts_batches_from_one_iterator(workers):
    stream, sampler = stream_of(40, workers=workers)
    iterators = []
    for epoch in range(3):
        assert list(stream.epoch(epoch)) == sampler.batches(epoch)
        iterators.append(stream._iterator)
    assert iterators[0] is iterators[1] is iterators[2]  # the workers ran on across the epochs


@pytest.mark.parametrize("workers", [0, 2])
def test_an_epoch_left_early_or_a_jump_starts_the_asked_epoch_afresh(workers):
    stream, sampler = stream_of(40, workers=workers)
    taken = stream.epoch(0)
    assert [next(taken), next(taken)] == sampler.batches(0)[:2]
    taken.close()
    assert list(stream.epoch(1)) == sampler.batches(1)
    assert list(stream.epoch(5)) == sampler.batches(5)
    assert list(stream.epoch(6)) == sampler.batches(6)


def test_consecutive_epochs_are_shuffled_apart():
    stream, _ = stream_of(40, workers=0)
    first, second = list(stream.epoch(0)), list(stream.epoch(1))
    assert first != second
    assert len(first) == len(second) and all(len(b) == 4 for b in first + second)
