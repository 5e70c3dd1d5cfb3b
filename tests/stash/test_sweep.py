"""A Stash study over several models (experiment.stash.sweep): one command plans every entry's pairs into one
campaign, with the study's stash.* values from experiment.stash under the command line's. The seed study's
depth sweep (stash2021_depth: every ResNet and VGG depth, both ablations), its CPU miniature and its batch
study (stash2021); the errors of a sweep."""

from __future__ import annotations

import pytest

from benchmarks.errors import ConfigError
from launchers import stash, stash_config

DEPTHS = {f"resnet{d}{a}" for d in (18, 34, 50, 101, 152) for a in ("", "_nobn", "_noskip")} | {
    f"vgg{d}" for d in (11, 13, 16, 19)
}


def layout(runs, model):
    return [(r.role, r.world_size, r.num_nodes, r.ranks_per_node) for r in runs if r.model == model]


def test_the_depth_sweep_plans_every_depth_and_both_ablations():
    st, cfg, runs = stash.plan(["experiment=stash2021_depth", "run.root=/tmp/r"])
    assert (st.gpus, st.nodes, st.loader, st.net_bandwidth_mbit) == (8, 2, "none", 10000.0)
    assert {r.model for r in runs} == DEPTHS and len(runs) == 3 * len(DEPTHS)
    for model in DEPTHS:  # 1 GPU, 8 GPUs of one node, 8 GPUs over 2 nodes: the interconnect and network pairs
        assert layout(runs, model) == [("gpu1", 1, 1, 1), ("node", 8, 1, 8), ("nodes", 8, 2, 4)], model
    assert {(r.per_gpu_batch, r.per_gpu_samples, r.loader) for r in runs} == {(32, 32 * 40, "synthetic")}
    assert {r.run_dir.parent.name for r in runs} == {"stash2021_depth"}  # one campaign: the report reads them all
    nobn = next(r for r in runs if r.model == "resnet50_nobn" and r.role == "node")
    assert "model.batch_norm=false" in nobn.overrides and "model.depth=50" in nobn.overrides
    table = stash.format_plan(st, cfg, runs, states=False)
    assert "stash study stash2021_depth: 19 models (resnet18, resnet34," in table and "57 runs" in table


def test_the_command_line_wins_over_the_experiments_stash_keys():
    st, _, runs = stash.plan(
        ["experiment=stash2021_depth", "stash.only=vgg16,resnet18_noskip", "stash.gpus=4", "stash.nodes=1"]
    )
    assert (st.gpus, st.nodes, st.loader) == (4, 1, "none")
    assert [(r.model, r.role, r.world_size) for r in runs] == [
        ("resnet18_noskip", "gpu1", 1),
        ("resnet18_noskip", "node", 4),
        ("vgg16", "gpu1", 1),
        ("vgg16", "node", 4),
    ]  # the sweep's order, only the entries asked for


def test_the_cpu_miniature_plans_two_ranks_and_two_emulated_nodes(compose):
    st, sweep = stash_config.experiment_study(compose(["experiment=stash2021_depth_cpu"]), [])
    names = [name for name, _ in sweep]
    assert names == ["resnet18", "resnet50", "resnet152", "resnet50_nobn", "resnet50_noskip", "vgg16"]
    assert (st.gpus, st.nodes, st.loader, st.launcher) == (2, 2, "none", "local")
    _, cfg, runs = stash.plan(["experiment=stash2021_depth_cpu", "stash.only=resnet50_nobn,vgg16"])
    assert cfg.system.name == "local_cpu" and cfg.model.image_size == 32
    assert layout(runs, "vgg16") == [("gpu1", 1, 1, 1), ("node", 2, 1, 2), ("nodes", 2, 2, 1)]
    assert {r.model for r in runs} == {"resnet50_nobn", "vgg16"} and {r.per_gpu_samples for r in runs} == {8}


def test_the_batch_study_pairs_every_model_at_32_and_128(compose, monkeypatch, tmp_path):
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(tmp_path))
    st, sweep = stash_config.experiment_study(compose(["experiment=stash2021"]), [])
    batches = {name: next(o for o in items if o.startswith("run.per_gpu_batch=")) for name, items in sweep}
    assert sorted(set(batches.values())) == ["run.per_gpu_batch=128", "run.per_gpu_batch=32"]
    assert len(batches) == 8 and st.loader == "native"
    _, _, runs = stash.plan(["experiment=stash2021", "stash.only=vgg16_b128"])
    assert [r.role for r in runs] == ["gpu1", "node", "nodes", "warm", "cold"]
    assert {r.per_gpu_batch for r in runs} == {128} and {r.model for r in runs} == {"vgg16"}
    assert [r.loader for r in runs if r.role in ("warm", "cold")] == ["native", "native"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["experiment=stash2021_depth", "stash.only=resnet51"], "stash.only=resnet51: resnet51 is no entry"),
        (["model=simple_cnn", "stash.loader=none", "stash.only=vgg16"], "but this study has no experiment.stash.sweep"),
        (["experiment=stash2021_depth", "stash.nodez=2"], "stash.nodez is not a stash key"),
    ],
)
def test_sweep_errors_name_the_key_and_the_fix(overrides, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        stash.plan(overrides)


def test_an_entry_may_not_set_what_stash_sets_per_run(monkeypatch, tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "my_sweep.yaml").write_text(
        "# @package _global_\nexperiment:\n  stash:\n    loader: none\n    sweep:\n"
        "      a: [model=simple_cnn]\n      b: [model=simple_cnn, loader=native]\n"
    )
    monkeypatch.setenv("DDLBENCH_CONFIG", str(tmp_path))
    with pytest.raises(ConfigError, match=r"loader=native \(experiment\.stash\.sweep\.b\): stash sets loader per run"):
        stash.plan(["experiment=my_sweep"])
    (tmp_path / "experiment" / "my_sweep.yaml").write_text(
        "# @package _global_\nexperiment:\n  stash:\n    loader: none\n    sweep:\n"
        "      a: [model=simple_cnn]\n      b: [model=simple_cnn, run.log_every=0]\n"
    )
    with pytest.raises(ConfigError, match="two sweep entries plan one run"):
        stash.plan(["experiment=my_sweep"])


def test_a_roles_config_is_what_hydra_composes_for_its_overrides(compose):
    """The run directory the planner names must be the one the run's own composition gives (that a memoised
    composition plus values is Hydra's whole composition: tests/unit/test_compose_memo.py)."""
    from omegaconf import OmegaConf

    _, _, runs = stash.plan(["experiment=stash2021_depth_cpu", "stash.only=resnet50_nobn"])
    gpu1 = runs[0]
    from benchmarks.rundir import cell_identity
    from benchmarks.validate import validate

    own = compose(list(gpu1.overrides))
    validate(own, check_device=False)
    name = cell_identity.dir_name(OmegaConf.to_container(own, resolve=True), world_size=1, num_nodes=1, repeat=0)
    assert gpu1.role == "gpu1" and gpu1.run_dir.name == name
