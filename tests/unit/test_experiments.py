"""The seed studies' experiments run what the studies ran and say where they had to guess: every study
experiment names its study; every key of experiment.guesses is a key of the composed config; experiment.*
is written in the resolved config but is no part of a run's identity; aach2023_scaling's DALI cells read the
TFRecord set and its native cells the JPEGs; composable_2023 plans BERT-large at the study's batch and epochs.
The Stash sweeps' plans: tests/stash/test_sweep.py."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, OmegaConf

from benchmarks.config import options
from benchmarks.rundir import cell_identity
from launchers import campaign

STUDIES = {"aach2023", "stash2021", "composable2023"}
NOT_STUDIES = {"smoke", "slurm_smoke", "fast_path"}  # the demo, the CI campaign, a preset: no study's experiment
STUDY_EXPERIMENTS = sorted(set(options("experiment")) - NOT_STUDIES)
JUWELS = ["experiment=aach2023_scaling", "system=juwels_booster"]


def has_key(cfg: DictConfig, key: str) -> bool:
    """Whether the dotted key is a key of the config (a section or a value; interpolations unresolved)."""
    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node:
            return False
        node = node._get_node(part)
    return True


def test_the_studies_experiments_are_known():
    assert {e.split("_")[0] for e in STUDY_EXPERIMENTS} == {"aach2023", "stash2021", "composable"}
    assert {"stash2021_depth", "stash2021_depth_cpu", "stash2021"} <= set(STUDY_EXPERIMENTS)


@pytest.mark.parametrize("experiment", STUDY_EXPERIMENTS)
def test_every_guess_is_a_config_key_and_every_note_says_why(compose, experiment):
    cfg = compose([f"experiment={experiment}"])
    assert cfg.experiment.study in STUDIES, experiment
    guesses = cfg.experiment.get("guesses") or {}
    stand_ins = cfg.experiment.get("stand_ins") or {}
    assert guesses or stand_ins, f"{experiment}: neither experiment.guesses nor experiment.stand_ins"
    for key, why in guesses.items():
        assert has_key(cfg, key), f"{experiment}: experiment.guesses.{key} is not a key of the composed config"
        assert not key.startswith(("experiment.guesses", "experiment.stand_ins", "experiment.study")), key
        assert isinstance(why, str) and len(why) > 20, (experiment, key, why)
    for ours, theirs in stand_ins.items():
        assert "." not in ours, f"{experiment}: stand_ins key {ours!r} would read as a nested key once flattened"
        assert isinstance(theirs, str) and len(theirs) > 20, (experiment, ours, theirs)


@pytest.mark.parametrize("experiment", ["aach2023_scaling", "stash2021_depth_cpu", "composable_2023"])
def test_the_notes_are_written_with_the_run_but_are_no_part_of_its_identity(compose, experiment):
    cfg = compose([f"experiment={experiment}"])
    written = OmegaConf.to_container(cfg, resolve=True)  # what config.yaml holds (launchers/lifecycle/rank.py)
    assert written["experiment"]["study"] == cfg.experiment.study
    flat = cell_identity.flatten(written)
    assert any(k.startswith("experiment.guesses.") for k in flat) or any(
        k.startswith("experiment.stand_ins.") for k in flat
    )
    key = cell_identity.identity(flat, world_size=2, num_nodes=1)
    assert not any(k.startswith("experiment") for k in key)
    other = {**flat, "experiment.study": "another", "experiment.guesses.run.per_gpu_batch": "another reason"}
    assert cell_identity.cell_hash(other, world_size=2, num_nodes=1) == cell_identity.cell_hash(
        flat, world_size=2, num_nodes=1
    )


def test_aach2023_dali_cells_read_tfrecord_and_native_cells_the_jpegs(compose, monkeypatch, tmp_path):
    from benchmarks.data.synth import synth_imagefolder
    from benchmarks.data.tfrecord import synth_tfrecords

    jpegs, tfrecord = tmp_path / "train", tmp_path / "train_tfrecord"
    size = dict(num_classes=1, images_per_class=4, width=8, height=8, quality=50, seed=0, progress=False)
    synth_imagefolder(jpegs, **size)  # a step of 4 GPUs at batch 1: the plan checks the data set too
    synth_tfrecords(tfrecord, **size, num_shards=1)
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(jpegs))
    monkeypatch.setenv("DDLBENCH_IMAGENET_TFRECORD", str(tfrecord))
    _, cells = campaign.plan([*JUWELS, "campaign.gpus=[4]", "campaign.axes.framework=[ddp]", "run.per_gpu_batch=1"])
    assert len(cells) == 2 * 3 * 3 and not [c.problem for c in cells if c.problem]  # loaders x depths x repeats
    seen = {}
    for cell in cells:
        if cell.repeat or "-resnet50-" not in cell.name:
            continue
        cfg = compose(cell.overrides(JUWELS))
        seen.setdefault(cfg.loader.name, set()).add((cfg.loader.get("reader"), cfg.data.path))
        assert f"-{cfg.loader.name}-" in cell.name
    assert seen == {"dali": {("tfrecord", str(tfrecord))}, "native": {(None, str(jpegs))}}


def test_aach2023_dali_without_its_tfrecord_set_is_impossible(monkeypatch, tmp_path):
    from benchmarks.data.synth import synth_imagefolder

    synth_imagefolder(
        tmp_path, num_classes=1, images_per_class=4, width=8, height=8, quality=50, seed=0, progress=False
    )
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(tmp_path))
    monkeypatch.delenv("DDLBENCH_IMAGENET_TFRECORD", raising=False)
    _, cells = campaign.plan([*JUWELS, "campaign.gpus=[4]", "campaign.axes.framework=[ddp]", "run.per_gpu_batch=1"])
    assert {c.problem is None for c in cells if "-native-" in c.name} == {True}
    assert {
        "loader=dali reads data but data.path is not set" in (c.problem or "") for c in cells if "-dali-" in c.name
    } == {True}


def test_composable_2023_plans_bert_large_at_the_studys_batch_and_epochs(compose):
    """The plan's cells (50, bert_large among them): tests/analysis/test_composable.py; here each workload."""
    cfg = compose(["experiment=composable_2023"])
    workloads = list(cfg.campaign.axes["experiment/composable_workload@_global_"])
    assert workloads == ["resnet50", "mobilenet_v2", "retinanet", "bert_base", "bert_large"]
    run = compose(["experiment=composable_2023", "experiment/composable_workload@_global_=bert_large"])
    assert (run.model.arch, run.model.size, run.model.seq_len) == ("bert", "large", 384)
    assert (run.run.per_gpu_batch, run.run.epochs, run.loader.samples_per_epoch) == (48, 2, 87599)
    expected = {  # the study's batch and epochs per workload (RetinaNet keeps its own batch: a stand-in)
        "resnet50": (128, 20),
        "mobilenet_v2": (64, 10),
        "retinanet": (16, 20),
        "bert_base": (96, 2),
        "bert_large": (48, 2),
    }
    for workload, (batch, epochs) in expected.items():
        run = compose(["experiment=composable_2023", f"experiment/composable_workload@_global_={workload}"])
        assert (run.run.per_gpu_batch, run.run.epochs) == (batch, epochs), workload
        assert cell_identity.model_name_of(run.model) == workload
    assert any("YOLOv5" in v for v in cfg.experiment.stand_ins.values())
    assert any(k.startswith("RetinaNet") for k in cfg.experiment.stand_ins)
    quick = compose(["experiment=composable_2023", "run.epochs=null"])
    assert quick.run.epochs is None and quick.run.steps == 200  # the same grid in steps


def test_composable_2023_cpu_keeps_its_model_axis_and_steps(compose):
    cfg = compose(["experiment=composable_2023_cpu"])
    assert list(cfg.campaign.axes)[-1] == "model" and cfg.run.epochs is None and cfg.run.steps == 6
