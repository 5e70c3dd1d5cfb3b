"""Validation (benchmarks/evaluate.py) with real DDP ranks: a held-out split of data.path, evaluated every N
steps and after the last, summed over ranks so that 2 ranks give exactly 1 process's accuracy on the same
weights; the one-line errors."""

from __future__ import annotations

import json

import pytest

from benchmarks.loaders.sharding import validation_split


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("eval") / "data"
    synth_imagefolder(out, num_classes=4, images_per_class=40, width=32, height=32, quality=90, seed=0, progress=False)
    return out


def test_the_split_is_fixed_disjoint_and_complete():
    train, held = validation_split(160, 0.25)
    assert len(held) == 40 and not set(train) & set(held) and sorted(train + held) == list(range(160))
    assert validation_split(160, 0.25) == (train, held)  # the same split in every run


def test_two_ranks_evaluate_exactly_what_one_process_does(tmp_path, data, ddlbench):
    """simple_cnn without augmentation: 2 ranks at batch 4 train the weights 1 rank gets at batch 8 (the
    sharding contract), so their evaluations agree; each sample of the held-out quarter is counted once."""
    common = [
        "loader=native",
        f"data.path={data}",
        "data.val_split=0.25",
        "run.eval_every_steps=4",
        "model=simple_cnn",
        "model.image_size=32",
        "model.num_classes=4",
        "run.steps=8",
        "run.warmup_steps=0",
        "loader.num_workers=0",
        "loader.augment=false",
        f"run.root={tmp_path}",
        "run.trace=off",
    ]
    evals = []
    for ranks in (1, 2):
        result = ddlbench("run", *common, f"run.per_gpu_batch={8 // ranks}", f"system.ranks_per_node={ranks}")
        assert result.returncode == 0, result.stderr[-3000:]
        assert "eval after step 8 (epoch" in result.stderr
        (path,) = tmp_path.glob(f"default/*-g{ranks}-n1-*/eval.jsonl")
        evals.append([json.loads(line) for line in path.read_text().splitlines()])
    one, two = evals
    assert [e["step"] for e in one] == [e["step"] for e in two] == [4, 8]
    for a, b in zip(one, two):
        assert a["samples"] == b["samples"] == 40
        assert a["train_samples"] == b["train_samples"] == 8 * a["step"]  # global samples, summed over ranks
        assert (a["top1"], a["top5"]) == (b["top1"], b["top5"])
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)
    assert one[-1]["top1"] > 0.5  # the learnable set is learned
    # the report's section: the last evaluation per cell and top-1 against the step
    from ddlbench.cli import main

    assert main(["report", str(tmp_path), "--out", str(tmp_path / "rep"), "--formats", "png"]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Validation accuracy" in text and (tmp_path / "rep" / "figures" / "accuracy_vs_step.png").is_file()
    assert "| top1 % | chance % |" in text  # 4 classes: 25.0


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["data.val_split=1.5"], "data.val_split=1.5 must be in [0, 1)"),
        (["run.eval_every_steps=10"], "run.eval_every_steps=10 needs a validation set"),
        (["loader=synthetic", "data.val_split=0.1"], "loader=synthetic reads no data set"),
        (
            ["loader=native", "data.path=/tmp", "data.val_path=/nonexistent"],
            "data.val_path='/nonexistent' is not a directory",
        ),
    ],
)
def test_bad_validation_settings_are_one_line(overrides, words, cli):
    result = cli("run", "--dry-run", *overrides)
    assert result.returncode == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1, (
        result.stderr
    )


def test_dali_evaluates_again_and_again(tmp_path, data, ddlbench, dali):
    """DALI's readers only go forward: every evaluation reads the held-out set's next epoch (the same samples:
    it is not shuffled), so a run evaluates as often as it likes (on the H200 the second evaluation failed)."""
    result = ddlbench(
        "run", "loader=dali", f"data.path={data}", "data.val_split=0.25", "run.eval_every_steps=3",
        "model=simple_cnn", "model.image_size=32", "model.num_classes=4", "run.steps=8", "run.warmup_steps=1",
        "run.per_gpu_batch=8", "system.ranks_per_node=1", f"run.root={tmp_path}", "run.trace=off",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = tmp_path.glob("default/*/eval.jsonl")
    evals = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["step"] for e in evals] == [3, 6, 9] and all(e["samples"] == 40 for e in evals)
