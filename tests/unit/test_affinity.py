"""system.cpu_bind on local runs: each rank's share of the node's CPUs."""
import json
import os

import pytest

from benchmarks import affinity
from benchmarks.errors import ConfigError
from tests.conftest import ddlbench


@pytest.mark.parametrize(("ranks", "cpus", "expected"), [
    (2, list(range(32)), [list(range(16)), list(range(16, 32))]),
    (3, list(range(8)), [[0, 1, 2], [3, 4, 5], [6, 7]]),
    (1, [5, 3, 4], [[3, 4, 5]]),
    (4, [0, 1], [[0], [1], [0], [1]]),  # fewer CPUs than ranks: one each, shared
])
def test_cores_for_splits_the_cpus_into_disjoint_blocks(ranks, cpus, expected):
    assert [affinity.cores_for(r, ranks, cpus) for r in range(ranks)] == expected


def test_compact_notation():
    assert affinity.compact([0, 1, 2, 3, 8, 9, 11]) == "0-3,8-9,11"
    assert affinity.compact(None) is None


def test_srun_only_bindings_are_refused_for_local_runs():
    affinity.check_local("cores")
    affinity.check_local(None)
    with pytest.raises(ConfigError, match=r"system.cpu_bind='map_ldom:0,1' is a srun binding .* use system.cpu_bind=cores"):
        affinity.check_local("map_ldom:0,1")


def test_srun_binding_is_left_as_srun_made_it():
    before = affinity.bind(None, local_rank=0, local_world_size=1, launched_by="slurm")
    assert affinity.bind("cores", local_rank=1, local_world_size=2, launched_by="slurm") == before


def test_local_ranks_bind_to_their_share(tmp_path):
    result = ddlbench("run", "framework=ddp", "model=simple_cnn", "loader=synthetic", "system.ranks_per_node=2",
                      "system.cpu_bind=cores", "run.warmup_steps=0", "run.steps=1", "run.log_every=0",
                      f"run.dir={tmp_path / 'run'}")
    assert result.returncode == 0, result.stderr[-3000:]
    headers = [json.loads((tmp_path / "run" / f"rank{r}.jsonl").read_text().splitlines()[0]) for r in (0, 1)]
    cpus = [set(affinity.cores_for(r, 2, sorted(os.sched_getaffinity(0)))) for r in (0, 1)]
    assert [h["cpus"] for h in headers] == [affinity.compact(sorted(c)) for c in cpus]


def test_local_run_with_a_srun_binding_is_refused_before_launch(tmp_path):
    result = ddlbench("run", "model=simple_cnn", "system.cpu_bind=sockets", f"run.dir={tmp_path / 'run'}")
    assert result.returncode != 0
    assert "system.cpu_bind='sockets' is a srun binding" in result.stderr
    assert not (tmp_path / "run").exists()
