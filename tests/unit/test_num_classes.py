"""model.num_classes=auto, the default: the data set's class count, counted before launch (validate.py) and
written into the config, so that the run directory, config.yaml, meta.json and the model's head have the
number; an explicit count below the data's is refused in one line, one above it warned; the report's
chance level beside top-1."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from benchmarks.adapter_config import config_default
from benchmarks.data.synth import synth_imagefolder
from benchmarks.data.tfrecord import convert_imagefolder, decode_example, find_tfrecords, read_records, record_labels
from benchmarks.errors import ConfigError
from benchmarks.models import build_model
from benchmarks.models.configs import ModelConfig
from benchmarks.validate import data_classes, resolve_run_dir, validate, warnings


@pytest.fixture(scope="module")
def six(tmp_path_factory):
    """`ddlbench data synth --classes 6 --per-class 4`."""
    out = tmp_path_factory.mktemp("classes") / "six"
    synth_imagefolder(out, num_classes=6, images_per_class=4, width=32, height=24, quality=90, seed=0, progress=False)
    return out


def _native(path) -> list[str]:
    return [
        "loader=native",
        f"data.path={path}",
        "data.val_split=0.2",
        "model=resnet",
        "model.depth=18",
        "run.per_gpu_batch=4",
    ]


def test_auto_is_the_default_and_composes_as_a_number_does(compose):
    assert config_default(ModelConfig, "num_classes") == "auto"
    assert compose([]).model.num_classes == "auto"
    assert compose(["model.num_classes=auto"]).model.num_classes == "auto"
    assert compose(["model.num_classes=6"]).model.num_classes == 6
    assert compose(["model=retinanet"]).model.num_classes == 91  # an option's own count stays


def test_an_image_folder_gives_its_class_folders_to_the_head(compose, six):
    cfg = compose(_native(six))
    validate(cfg, check_device=False)
    assert cfg.model.num_classes == 6 and data_classes(cfg) == (6, f"class folders in data.path={six}")
    assert OmegaConf.to_container(cfg, resolve=True)["model"]["num_classes"] == 6  # what config.yaml holds
    from benchmarks.adapters import build_model_and_optimizer

    model, _ = build_model_and_optimizer(cfg, torch.device("cpu"), global_batch=8)
    assert model.fc.out_features == 6


def test_auto_names_the_run_directory_of_its_number(compose, six, tmp_path):
    """A config named before it is validated (maxbatch's probes, a Slurm job's) gets the directory its run
    has: the one of model.num_classes=6."""
    root = f"run.root={tmp_path}"
    auto = resolve_run_dir(compose([*_native(six), root]), world_size=1, num_nodes=1)
    given = resolve_run_dir(compose([*_native(six), root, "model.num_classes=6"]), world_size=1, num_nodes=1)
    assert auto == given


def test_a_count_below_the_data_sets_is_one_line_before_launch(compose, six, cli):
    line = (
        f"model.num_classes=4 but the data set has 6 classes (class folders in data.path={six}): labels 4-5 "
        "have no output; pass model.num_classes=6 or auto"
    )
    with pytest.raises(ConfigError) as error:
        validate(compose([*_native(six), "model.num_classes=4"]), check_device=False)
    assert str(error.value) == line
    result = cli("run", *_native(six), "model.num_classes=4", "--dry-run")
    assert result.returncode == 2 and result.stderr.strip() == f"ddlbench: error: {line}"


def test_a_count_above_the_data_sets_runs_with_a_warning(compose, six, cli):
    cfg = compose([*_native(six), "model.num_classes=10"])
    validate(cfg, check_device=False)
    assert cfg.model.num_classes == 10
    line = (
        f"model.num_classes=10 but the data set has 6 classes (class folders in data.path={six}): 4 of the "
        "head's outputs are for labels it never has (chance top-1 is 1/6, not 1/10); pass model.num_classes=6 or auto"
    )
    assert line in warnings(cfg)
    result = cli("run", *_native(six), "model.num_classes=10", "--dry-run")
    assert result.returncode == 0 and f"[ddlbench] warning: {line}\n" in result.stderr
    assert not [w for w in warnings(compose([*_native(six), "model.num_classes=6"])) if "num_classes" in w]


def test_without_a_data_set_auto_is_1000(compose, six):
    for given in ([], ["model.num_classes=auto"]):
        cfg = compose(["loader=synthetic", *given])
        validate(cfg, check_device=False)
        assert cfg.model.num_classes == 1000
    # a task without class labels counts none, whatever data.path says
    bert = compose(["model=bert", "model.size=tiny", f"data.path={six}", "model.num_classes=auto"])
    validate(bert, check_device=False)
    assert bert.model.num_classes == 1000


def test_the_synthetic_loader_trains_the_head_of_the_data_set_it_is_compared_with(compose, six):
    """Stash's pairs and a campaign's loader axis give every run the same data.path: the synthetic run
    trains the model the real-data runs train. It reads no data, so a number is never refused."""
    cfg = compose(["loader=synthetic", f"data.path={six}"])
    validate(cfg, check_device=False)
    assert cfg.model.num_classes == 6
    validate(compose(["loader=synthetic", f"data.path={six}", "model.num_classes=4"]), check_device=False)
    with pytest.raises(ConfigError, match=r"data.path='/nonexistent' is not a directory, and model.num_classes=auto"):
        validate(compose(["loader=synthetic", "data.path=/nonexistent"]), check_device=False)


def test_a_folder_without_classes_stops_auto_only(compose, tmp_path):
    """Planning may pass a folder that holds no data yet: an explicit number needs no count (check_data says
    what the data set lacks where it is asked), auto cannot name its run without one."""
    empty = tmp_path / "empty"
    empty.mkdir()
    validate(compose(["loader=native", f"data.path={empty}", "model.num_classes=10"]), check_device=False)
    with pytest.raises(ConfigError, match=r"holds no class folders .* so model.num_classes=auto has none to count"):
        validate(compose(["loader=native", f"data.path={empty}"]), check_device=False)


def test_a_tfrecord_folder_gives_its_labels_range(compose, six, tmp_path):
    out = tmp_path / "tfr"
    convert_imagefolder(six, out, num_shards=2, seed=0, progress=False)

    def counted() -> tuple[int, str]:
        cfg = compose(["loader=dali", "loader.reader=tfrecord", f"data.path={out}"])
        validate(cfg, check_device=False)
        return cfg.model.num_classes, data_classes(cfg)[1]

    assert counted() == (6, f"dataset.json (num_classes) in data.path={out}")  # what the converter wrote
    manifest = json.loads((out / "dataset.json").read_text())
    (out / "dataset.json").unlink()  # a folder from another tool: its records' labels, read once
    assert counted() == (6, f"record labels (the largest + 1) in data.path={out}")
    for record, _ in find_tfrecords(out):
        labels = [decode_example(data)["image/class/label"][0] for data in read_records(record)]
        assert list(record_labels(record)) == labels
    (out / "dataset.json").write_text(json.dumps({**manifest, "label_base": 1}))  # TF's ImageNet: 1..1000
    assert counted()[0] == 7


@pytest.mark.parametrize("value", ["six", "0", "6.5", "null"])
def test_a_count_is_a_whole_number_or_auto(compose, value):
    with pytest.raises(ConfigError, match=r"model.num_classes=\S+ must be a whole number >= 1 or auto"):
        validate(compose([f"model.num_classes={value}"]), check_device=False)


def test_auto_never_reaches_a_builder():
    with pytest.raises(ConfigError, match="num_classes=auto is the data set's class count"):
        build_model(arch="resnet", depth=18, num_classes="auto", seed=0)


def test_a_prediction_of_an_auto_model_without_data_has_1000_classes():
    from benchmarks import gradients

    auto = gradients.layout({"arch": "simple_cnn", "num_classes": "auto"}, image_size=32)
    assert auto == gradients.layout({"arch": "simple_cnn", "num_classes": 1000}, image_size=32)


def test_the_reports_chance_level_is_one_over_the_classes():
    from analysis.accuracy import chance_pct

    cells = pd.DataFrame({"cell_hash": ["a", "b", "c"], "top1_pct": [40.0, 1.0, 50.0]})
    runs = pd.DataFrame(
        {
            "cell_hash": ["a", "a", "b", "c"],
            "meta.num_classes.data": [6, 6, None, None],  # counted by the run (since auto)
            "config.model.num_classes": [10, 10, 1000, "auto"],  # a warned head; an older run; none readable
        }
    )
    chance = chance_pct(cells, runs)
    assert chance.iloc[:2].round(2).tolist() == [16.67, 0.1] and pd.isna(chance.iloc[2])
