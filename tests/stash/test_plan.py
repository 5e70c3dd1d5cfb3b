"""The Stash planner: per-GPU batch and per-GPU samples constant across every pair; roles, layout, errors."""

from __future__ import annotations

import re

import pytest

from benchmarks.errors import ConfigError
from launchers import stash

DATA = "/tmp/ddlbench-stash-test-data"  # an empty folder: the planner checks that data.path is one, never reads it
BASE = ["model=simple_cnn", f"data.path={DATA}", "run.per_gpu_batch=16", "run.steps=12", "run.root=/tmp/r"]


@pytest.fixture(autouse=True)
def data_dir():
    import os

    os.makedirs(DATA, exist_ok=True)


def by_role(runs):
    out = {}
    for run in runs:
        out.setdefault(run.role, []).append(run)
    return out


@pytest.mark.parametrize("gpus,nodes", [(2, 2), (4, 2), (8, 4), (4, 1)])
def test_pairs_keep_per_gpu_batch_and_samples(gpus, nodes):
    _, cfg, runs = stash.plan([*BASE, f"stash.gpus={gpus}", f"stash.nodes={nodes}", "stash.repeats=2"])
    roles = by_role(runs)
    assert list(roles) == ["gpu1", "node", *(["nodes"] if nodes > 1 else []), "warm", "cold"]
    assert {r.per_gpu_batch for r in runs} == {16}
    assert {r.per_gpu_samples for r in runs} == {16 * 12}
    for run in runs:
        assert run.global_batch == 16 * run.world_size
        assert run.ranks_per_node * run.num_nodes == run.world_size
        assert "run.per_gpu_batch=16" in run.overrides and "run.steps=12" in run.overrides
    assert [(r.world_size, r.num_nodes) for r in roles["gpu1"]] == [(1, 1)] * 2
    assert {(r.world_size, r.num_nodes) for r in roles["node"] + roles["warm"] + roles["cold"]} == {(gpus, 1)}
    if nodes > 1:
        assert {(r.world_size, r.num_nodes, r.ranks_per_node) for r in roles["nodes"]} == {(gpus, nodes, gpus // nodes)}
    assert [r.repeat for r in roles["node"]] == [0, 1]


def test_one_gpu_run_gets_the_per_gpu_share_of_the_virtual_epoch():
    _, cfg, runs = stash.plan([*BASE, "stash.gpus=4"])
    gpu1 = by_role(runs)["gpu1"][0]
    assert "loader.samples_per_epoch=3200" in gpu1.overrides  # 12800 / 4: same steps per epoch as each of the 4
    assert not any(o.startswith("loader.samples_per_epoch") for o in by_role(runs)["node"][0].overrides)


def test_loaders_caches_and_run_dirs():
    _, cfg, runs = stash.plan([*BASE, "stash.gpus=2"])
    roles = by_role(runs)
    assert {r.loader for r in roles["gpu1"] + roles["node"] + roles["nodes"]} == {"synthetic"}
    assert roles["warm"][0].loader == roles["cold"][0].loader == "native"
    assert "data.cache=cold" in roles["cold"][0].overrides and "data.cache=warm" in roles["warm"][0].overrides
    warm, cold = roles["warm"][0].run_dir, roles["cold"][0].run_dir
    assert cold.parent.name == "cold-cache" and cold.parent.parent == warm.parent
    name = r"ddp-native-simple_cnn-fp32-g2-n1-b16-([0-9a-f]{8})-r0"
    warm_hash = re.fullmatch(rf"/tmp/r/stash/{name}", str(warm))
    cold_hash = re.fullmatch(rf"/tmp/r/stash/cold-cache/{name}", str(cold))
    assert warm_hash and cold_hash, (warm, cold)
    # the same readable name; data.cache is a setting of the run, so warm and cold are two cells
    assert warm_hash[1] != cold_hash[1]
    assert re.fullmatch(r"ddp-synthetic-simple_cnn-fp32-g2-n2-b16-[0-9a-f]{8}-r0", roles["nodes"][0].run_dir.name)
    assert all(f"run.dir={r.run_dir}" in r.overrides for r in runs)
    assert all(f"run.stash_role={r.role}" in r.overrides for r in runs)  # what the report pairs (issue 36)


def test_one_gpu_study_pairs_cpu_and_disk_only():
    _, _, runs = stash.plan([*BASE, "stash.gpus=1", "stash.nodes=1", "stash.loader=dali"])
    assert [(r.role, r.loader, r.world_size) for r in runs] == [
        ("gpu1", "synthetic", 1),
        ("warm", "dali", 1),
        ("cold", "dali", 1),
    ]
    assert len({r.run_dir for r in runs}) == 3


def test_no_real_loader_and_one_node():
    _, _, runs = stash.plan(["model=simple_cnn", "stash.loader=none", "stash.nodes=1", "stash.gpus=2"])
    assert [r.role for r in runs] == ["gpu1", "node"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["stash.gpu=2"], "stash.gpu is not a stash key"),
        (["stash.gpus=two"], "stash.gpus=two must be of type int"),
        (["stash.gpus=3", "stash.nodes=2"], "stash.nodes=2 does not divide stash.gpus=3"),
        (["stash.repeats=0"], "stash.repeats=0 must be >= 1"),
        (["stash.launcher=k8s"], "stash.launcher=k8s is unknown"),
        (["loader=native"], "loader=native: stash sets loader per run itself"),
        (["run.epochs=1", f"data.path={DATA}"], "run.epochs=1: stash pairs runs by measured steps"),
        (
            ["data.cache_evict=magic", f"data.path={DATA}"],
            "data.cache_evict=magic is not allowed; choose auto, drop_caches or fadvise",
        ),
        ([], "loader=native reads data but data.path is not set"),
    ],
)
def test_errors_name_key_value_and_fix(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.").replace("=", "=")):
        stash.plan(["model=simple_cnn", *overrides])


def test_slurm_dry_run_sbatch_lines(capsys):
    st, cfg, runs = stash.plan([*BASE, "system=slurm_cpu", "stash.gpus=4", "stash.nodes=2", "stash.loader=none"])
    assert stash.run_slurm(st, cfg, runs, dry_run=True) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert "--nodes=1 --ntasks-per-node=1" in lines[0] and "--nodes=1 --ntasks-per-node=4" in lines[1]
    assert "--nodes=2 --ntasks-per-node=2" in lines[2]
    name = r"ddp-synthetic-simple_cnn-fp32-g4-n2-b16-[0-9a-f]{8}-r0"
    assert re.search(rf"--job-name=ddlbench/stash/{name}(\s|$)", lines[2]), lines[2]
    assert re.search(rf"run\.dir=/tmp/r/stash/{name}(\s|$)", lines[2]) and "run.repeat=0" in lines[2]


def test_plan_cli_prints_the_table(cli):
    done = cli("stash", "plan", *BASE, "stash.gpus=2")
    assert done.returncode == 0, done.stderr
    assert "samples/gpu" in done.stdout and "cold-cache" in done.stdout
    assert "5 runs; network run: 2 nodes emulated (1000 Mbit/s)" in done.stdout
    bad = cli("stash", "plan", "stash.nodez=2")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "stash.nodez is not a stash key" in bad.stderr


def test_cold_cache_note_when_the_dataset_is_too_small(tmp_path):
    for i in range(10):
        (tmp_path / f"{i}.jpg").write_bytes(b"x")
    _, cfg, runs = stash.plan(
        [
            "model=simple_cnn",
            f"data.path={tmp_path}",
            "run.per_gpu_batch=2",
            "run.steps=2",
            "run.warmup_steps=1",
            "stash.gpus=2",
            "stash.nodes=1",
        ]
    )
    assert stash.cold_cache_note(cfg, runs) == (
        f"note: a cold run reads 12 samples but {tmp_path} holds 10 files: later steps re-read cached pages, "
        "so the disk stall is understated; use a larger dataset or fewer run.steps"
    )
    _, cfg, runs = stash.plan(
        [
            "model=simple_cnn",
            f"data.path={tmp_path}",
            "run.per_gpu_batch=1",
            "run.steps=2",
            "run.warmup_steps=1",
            "stash.gpus=2",
            "stash.nodes=1",
        ]
    )
    assert stash.cold_cache_note(cfg, runs) is None
