"""The sharding contract: disjoint, complete, equal steps per rank (2 and 3 ranks, uneven counts)."""

import pytest

from benchmarks.errors import ConfigError
from benchmarks.loaders.sharding import epoch_permutation, shard_batches, short_last_step


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("num_samples", [3, 10, 13, 64, 101])
@pytest.mark.parametrize("batch", [1, 4, 7])
def test_contract(world_size, num_samples, batch):
    order = epoch_permutation(num_samples, seed=1, epoch=2, shuffle=True)
    shards = [shard_batches(order, rank=r, world_size=world_size, per_gpu_batch=batch) for r in range(world_size)]
    samples = [i for shard in shards for b in shard for i in b]
    assert sorted(samples) == list(range(num_samples))  # complete and disjoint
    assert len({len(shard) for shard in shards}) == 1  # equal steps on every rank
    assert all(len(b) > 0 for shard in shards for b in shard)  # no empty batch


def test_w_ranks_see_what_one_rank_sees_at_w_times_the_batch():
    order = epoch_permutation(40, seed=0, epoch=0, shuffle=True)
    one = shard_batches(order, rank=0, world_size=1, per_gpu_batch=8)
    two = [shard_batches(order, rank=r, world_size=2, per_gpu_batch=4) for r in range(2)]
    for step, batch in enumerate(one):
        assert two[0][step] + two[1][step] == batch


def test_epochs_reshuffle_identically_on_every_rank():
    assert epoch_permutation(50, seed=3, epoch=0, shuffle=True) == epoch_permutation(50, seed=3, epoch=0, shuffle=True)
    assert epoch_permutation(50, seed=3, epoch=0, shuffle=True) != epoch_permutation(50, seed=3, epoch=1, shuffle=True)


def test_dataset_smaller_than_world():
    with pytest.raises(ConfigError, match="dataset has 2 samples but world size is 3"):
        shard_batches([0, 1], rank=0, world_size=3, per_gpu_batch=1)


@pytest.mark.parametrize(
    ("num_samples", "world_size", "batch", "expected"),
    [
        (4096, 1, 256, None),  # whole batches
        (4100, 1, 256, 4),  # 16 whole steps and one of 4
        (4100, 2, 256, 2),
        (4097, 2, 256, None),  # one leftover sample rides along with the previous step
        (1000, 3, 100, 33),  # tail 100 split over 3 ranks: the smallest share
    ],
)
def test_short_last_step(num_samples, world_size, batch, expected):
    assert short_last_step(num_samples, world_size=world_size, per_gpu_batch=batch) == expected
    if expected is not None:  # the rank with the fewest samples in shard_batches' last step
        order = list(range(num_samples))
        sizes = [
            len(shard_batches(order, rank=r, world_size=world_size, per_gpu_batch=batch)[-1]) for r in range(world_size)
        ]
        assert min(sizes) == expected
