"""`ddlbench predict` refuses what its calibration did not measure (issue 49): every key of the model and
precision groups, the optimizer, and another device than the target system's unless the compute is scaled
(--compute-scale) or measured there (--compute-from); a scaled compute is labelled on every table, in
cell.json and on the figures. On committed runs: the 1-GPU H200 run of docs/results and a CPU run of the
papers' runs (no training here)."""

from __future__ import annotations

import dataclasses
import json
import typing
from enum import Enum
from pathlib import Path

import pytest

from benchmarks.models.configs import ModelConfig
from benchmarks.rundir import cell_identity
from benchmarks.schema import PrecisionConfig

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "docs/results/2026-12-02-h200-predict/resnet50-b64-g1"
H200_CELL = ["system=h200", "model=resnet", "model.depth=50", "run.per_gpu_batch=64", "precision=amp_bf16"]
CPU = REPO / "docs/papers/runs/stash2021/stash2021_depth_cpu/ddp-synthetic-resnet18-fp32-g1-n1-b4-175c8362-r0"
CPU_CELL = ["model=resnet", "model.depth=18", "run.per_gpu_batch=4", "precision=fp32", "loader=synthetic"]
CPU_32PX = [*CPU_CELL, "model.image_size=32"]


def _other(kind: typing.Any, value: typing.Any) -> typing.Any:
    """A value of the field's type other than `value` (the calibration run's)."""
    options = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
    kind = options[0]
    if isinstance(kind, type) and issubclass(kind, Enum):
        return next(m.value for m in kind if m.value != value)
    if kind is bool:
        return "false" if value else "true"
    if kind is int:
        return (value or 0) + 1
    if kind is float:
        return 2.0 if value != 2.0 else 0.5
    if kind is str:
        return f"{value}x"
    return 10  # num_classes (typed Any): a count the run did not have


def _fields(schema: type, group: str) -> list[tuple[str, typing.Any]]:
    hints = typing.get_type_hints(schema)
    return [(f"{group}.{f.name}", hints[f.name]) for f in dataclasses.fields(schema)]


@pytest.fixture(scope="module")
def h200_config() -> dict:
    import yaml

    return yaml.safe_load((H200 / "config.yaml").read_text())


def test_the_calibration_configuration_itself_is_predicted(cli):
    done = cli("predict", *H200_CELL, "--from", str(H200), "--gpus", "1")
    assert done.returncode == 0, done.stderr
    assert "resnet50 batch 64/GPU 224 px amp_bf16, system=h200" in done.stdout


@pytest.mark.parametrize(
    "key, kind", _fields(ModelConfig, "model") + _fields(PrecisionConfig, "precision"), ids=lambda v: str(v)
)
def test_every_key_of_the_model_and_precision_groups_the_run_did_not_measure_is_refused(key, kind, h200_config, cli):
    group, name = key.split(".")
    # a key added after the calibration run was made: it ran at the key's ADDED_SETTING_DEFAULTS value
    other = _other(kind, h200_config[group].get(name, cell_identity.ADDED_SETTING_DEFAULTS.get(key)))
    done = cli("predict", *H200_CELL, f"{key}={other}", "--from", str(H200), "--gpus", "1")
    assert done.returncode == 2 and not done.stdout, (key, done.stdout)
    error = done.stderr.strip()
    assert len(error.splitlines()) == 1 and error.startswith("ddlbench: error: "), error
    # the key itself, or the model / precision it makes (model.depth=51: model=resnet51)
    assert f"{key}={other}" in error or error.startswith(f"ddlbench: error: {group}="), error
    assert "--from a run of" in error, error


def test_the_optimizer_is_refused_too(cli):
    done = cli("predict", *H200_CELL, "optim.name=adamw", "--from", str(H200), "--gpus", "1")
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == "ddlbench: error: " + (
        f"optim.name=adamw: the calibration run {H200.name} ran optim.name=sgd; pass --from a run of "
        "optim.name=adamw (ddlbench run ... on a GPU of the kind it ran on), or predict optim.name=sgd"
    )


def test_an_image_size_the_run_did_not_measure_is_refused_in_one_line(cli):
    """The issue's case: a 32 px CPU run asked for 224 px onto JUWELS gave the 32 px table, exit 0."""
    done = cli("predict", *CPU_CELL, "model.image_size=224", "--system", "juwels_booster", "--from", str(CPU))
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == "ddlbench: error: " + (
        f"model.image_size=224: the calibration run {CPU.name} ran model.image_size=32; pass --from a run of "
        "model.image_size=224 (ddlbench run ... on a GPU of the kind it ran on), or predict model.image_size=32"
    )


def test_a_cpu_calibration_onto_gpus_is_refused_without_a_compute_scale(cli):
    done = cli("predict", *CPU_32PX, "--system", "juwels_booster", "--from", str(CPU))
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == "ddlbench: error: " + (
        f"system=juwels_booster: the calibration run {CPU.name} computed on CPU (system=local_cpu), not on "
        "system=juwels_booster's GPUs; pass --compute-scale F (its compute time over the calibration's), or "
        "--compute-from RUN_DIR (a run of this configuration on system=juwels_booster)"
    )


def test_another_gpu_system_is_refused_too(cli):
    done = cli("predict", *H200_CELL[1:], "--system", "juwels_booster", "--from", str(H200), "--gpus", "4")
    assert done.returncode == 2 and not done.stdout
    assert "computed on NVIDIA H200 (system=h200), not on system=juwels_booster's GPUs" in done.stderr


def test_a_scaled_cpu_calibration_is_labelled_on_every_table_and_in_cell_json(cli, tmp_path):
    out = tmp_path / "pred"
    done = cli(
        "predict", *CPU_32PX, "--system", "juwels_booster", "--from", str(CPU), "--compute-scale", "3",
        "--gpus", "4,8", "--reference", "aach2023", "--out", str(out),
    )  # fmt: skip
    # aach2023 has no resnet18 rows: the refusal; the same without --reference predicts
    assert done.returncode == 2 and "--reference aach2023: no rows for model=resnet18" in done.stderr
    done = cli(
        "predict", *CPU_32PX, "--system", "juwels_booster", "--from", str(CPU), "--compute-scale", "3",
        "--gpus", "4,8", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    label = f"compute from a calibration on CPU ({CPU.name}, system=local_cpu), scaled x3"
    lines = done.stdout.splitlines()
    assert (
        lines[0] == "# ddlbench predict: ddp resnet18 batch 4/GPU 32 px fp32, system=juwels_booster (4 GPUs per node)"
    )
    assert lines[1].startswith(f"# compute from {CPU.name} (1 CPU rank, system=local_cpu), scaled x3: fwd ")
    assert f"# {label}" in lines, lines  # under the table
    cell = json.loads((out / "cell.json").read_text())
    assert cell["image_size"] == 32 and cell["compute"] == label and cell["compute_scale"] == 3.0
    assert cell["calibration_device"] == "CPU" and cell["system"] == "juwels_booster"
    assert cell["title"] == f"system=juwels_booster, ddp resnet18 fp32, batch 4/GPU, 32 px; {label}"


def test_compute_from_a_run_on_the_target_system_replaces_the_compute(cli):
    """--compute-from: the compute of a run on the predicted system, the data path of --from."""
    done = cli(
        "predict", *H200_CELL, "--from", str(H200), "--compute-from", str(H200), "--gpus", "1"
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"# compute from {H200.name} on system=h200" in done.stdout
    refused = cli("predict", *CPU_32PX, "--system", "juwels_booster", "--from", str(CPU), "--compute-from", str(CPU))
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        f"--compute-from {CPU}: the run computed on CPU (system=local_cpu), not on system=juwels_booster's GPUs; "
        "give a run made on system=juwels_booster"
    )


def test_the_figures_name_system_model_batch_image_size_and_calibration():
    import pandas as pd

    from analysis.predict.figures import predicted_breakdown, predicted_vs_reference

    title = "system=juwels_booster, ddp resnet18 fp32, batch 4/GPU, 32 px; calibration run-x (system=local_cpu)"
    table = pd.DataFrame(
        {"gpus": [4, 8], "efficiency": [1.0, 0.9], "data_pct": [1, 1], "compute_pct": [90, 80],
         "allreduce_pct": [8, 18], "other_pct": [1, 1]}
    )  # fmt: skip
    fig = predicted_breakdown(table, about=title)
    assert title in "\n".join(t.get_text() for t in fig.texts).replace("\n", " ")
    compared = table.assign(
        allreduce_pct_ref=1.0, allreduce_pct_pred=1.0, data_pct_ref=1.0, data_pct_pred=1.0, compute_pct_ref=1.0,
        compute_pct_pred=1.0, held_out=True,
    )  # fmt: skip
    fig = predicted_vs_reference(compared, about=title)
    assert title in "\n".join(t.get_text() for t in fig.texts).replace("\n", " ")


def test_from_alone_predicts_the_runs_model_image_size_precision_and_batch_and_says_so(cli):
    """issue 64: predict refused three times for what --from already said (the model, the image size, ...); now it
    takes them from the run's config.yaml unless given, in one line."""
    done = cli("predict", "system=h200", "--from", str(H200), "--gpus", "1")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"# from --from {H200.name}: model=resnet model.depth=50 model.image_size=224")
    assert "precision=amp_bf16 run.per_gpu_batch=64 (give any of them to predict another)" in first
    assert "resnet50 batch 64/GPU 224 px amp_bf16, system=h200" in done.stdout
    # a key given wins over the run's: the run did not measure it, so it is refused as before
    other = cli("predict", "system=h200", "model.image_size=128", "--from", str(H200), "--gpus", "1")
    assert other.returncode == 2 and "image_size" in other.stderr
