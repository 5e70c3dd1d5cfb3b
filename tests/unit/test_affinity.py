"""system.cpu_bind on local runs: each rank's share of the node's CPUs."""

import json
import os

import pytest

from benchmarks import affinity
from benchmarks.errors import ConfigError


@pytest.mark.parametrize(
    ("ranks", "cpus", "expected"),
    [
        (2, list(range(32)), [list(range(16)), list(range(16, 32))]),
        (3, list(range(8)), [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (1, [3, 4, 5], [[3, 4, 5]]),
        (4, [0, 1], [[0], [1], [0], [1]]),  # fewer CPUs than ranks: one each, shared
    ],
)
def test_cores_for_splits_the_cpus_into_disjoint_blocks(ranks, cpus, expected):
    assert [affinity.cores_for(r, ranks, cpus) for r in range(ranks)] == expected


def test_topology_order_keeps_hyperthreads_and_sockets_together(tmp_path):
    # 2 sockets x 2 cores x 2 threads, numbered as Linux often does: core i's second thread is i + 4
    for cpu in range(8):
        topology = tmp_path / f"cpu{cpu}" / "topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{(cpu % 4) // 2}\n")
        (topology / "core_id").write_text(f"{cpu % 2}\n")
    ordered = affinity.topology_order(list(range(8)), sysfs=tmp_path)
    assert ordered == [0, 4, 1, 5, 2, 6, 3, 7]
    assert [affinity.cores_for(r, 2, ordered) for r in (0, 1)] == [[0, 4, 1, 5], [2, 6, 3, 7]]  # one socket each
    assert affinity.topology_order([3, 1, 2], sysfs=tmp_path / "none") == [1, 2, 3]  # no sysfs: number order


def test_compact_notation():
    assert affinity.compact([0, 1, 2, 3, 8, 9, 11]) == "0-3,8-9,11"
    assert affinity.compact(None) is None


def test_srun_only_bindings_are_refused_for_local_runs():
    affinity.check_local("cores")
    affinity.check_local(None)
    with pytest.raises(
        ConfigError, match=r"system.cpu_bind='map_ldom:0,1' is a srun binding .* use system.cpu_bind=cores"
    ):
        affinity.check_local("map_ldom:0,1")


def test_srun_binding_is_left_as_srun_made_it(monkeypatch):
    calls = []
    monkeypatch.setattr(affinity.os, "sched_setaffinity", lambda pid, cpus: calls.append(cpus))
    affinity.bind("cores", local_rank=1, local_world_size=2, launched_by="slurm")
    assert calls == []
    affinity.bind("cores", local_rank=1, local_world_size=2, launched_by="torchrun")
    assert len(calls) == 1


def test_local_ranks_bind_to_their_share(tmp_path, ddlbench):
    result = ddlbench(
        "run",
        "framework=ddp",
        "model=simple_cnn",
        "loader=synthetic",
        "system.ranks_per_node=2",
        "system.cpu_bind=cores",
        "run.warmup_steps=0",
        "run.steps=1",
        "run.log_every=0",
        f"run.dir={tmp_path / 'run'}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    headers = [json.loads((tmp_path / "run" / f"rank{r}.jsonl").read_text().splitlines()[0]) for r in (0, 1)]
    cpus = [set(affinity.cores_for(r, 2, affinity.topology_order(list(os.sched_getaffinity(0))))) for r in (0, 1)]
    assert [h["cpus"] for h in headers] == [affinity.compact(sorted(c)) for c in cpus]


def test_local_run_with_a_srun_binding_is_refused_before_launch(tmp_path, cli):
    result = cli("run", "model=simple_cnn", "system.cpu_bind=sockets", f"run.dir={tmp_path / 'run'}")
    assert result.returncode != 0
    assert "system.cpu_bind='sockets' is a srun binding" in result.stderr
    assert not (tmp_path / "run").exists()
