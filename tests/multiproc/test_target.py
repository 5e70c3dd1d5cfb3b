"""Time to accuracy (run.target_top1) with real DDP ranks on the learnable synthetic set: the run stops at
the first evaluation that reaches the target and records time, samples and steps to it; with lr ~ 0 (1e-9:
optim.lr=0 itself is refused before launch) the weights do not move and the target is not reached, nor with
a schedule that kills the lr after a few steps (so the test can fail); the MLLOG file
is read by MLPerf's own parser (mlperf-logging)."""

from __future__ import annotations

import json

import pytest

TARGET = 0.9
STEP_BUDGET = 60  # 6 epochs of 10 steps: a learning model reaches the target well within it


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("target") / "data"
    synth_imagefolder(out, num_classes=4, images_per_class=50, width=32, height=32, quality=90, seed=0, progress=False)
    return out


def _run(ddlbench, tmp_path, data, *extra: str):
    common = [
        "loader=native",
        f"data.path={data}",
        "data.val_split=0.2",
        "run.eval_every_epochs=1",
        f"run.target_top1={TARGET}",
        "model=simple_cnn",
        "model.image_size=32",
        "model.num_classes=4",
        f"run.steps={STEP_BUDGET - 2}",
        "run.warmup_steps=2",
        "run.per_gpu_batch=8",  # 160 training images / (2 ranks x 8) = 10 steps per epoch
        "system.ranks_per_node=2",
        "loader.num_workers=0",
        f"run.root={tmp_path}",
        "run.trace=off",
        "run.log_every=0",
    ]
    result = ddlbench("run", *common, *extra)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (p.parent for p in tmp_path.glob("default/*/summary.json"))
    return result, run_dir, json.loads((run_dir / "summary.json").read_text())


def test_a_learning_run_stops_at_its_target_and_mllog_parses(tmp_path, data, ddlbench):
    # with a trace window (on GPUs by default), which the stop leaves untraced
    result, run_dir, summary = _run(ddlbench, tmp_path, data, "run.trace=on")
    assert "no trace breakdown" in result.stderr
    assert summary["target_reached"] is True, result.stderr[-2000:]
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    # it stopped at the first evaluation at or above the target, within the step budget
    assert evals[-1]["top1"] >= TARGET and all(e["top1"] < TARGET for e in evals[:-1] if e["step"] > 2)
    assert summary["steps_to_target"] == evals[-1]["step"] < STEP_BUDGET
    assert summary["measured_steps"] == evals[-1]["step"] - 2  # the steps after the warm-up, up to the stop
    assert summary["samples_to_target"] == evals[-1]["train_samples"] == 16 * evals[-1]["step"]
    assert summary["time_to_target_s"] == pytest.approx(evals[-1]["train_s"]) and summary["time_to_target_s"] > 0
    # start-up apart (MLPerf HPC's time to train adds it): before the first step, inside the run's runtime
    assert 0 < summary["startup_s"] < summary["runtime_s"]
    assert [e["epochs"] for e in evals] == [float(i + 1) for i in range(len(evals))]  # every epoch's end
    assert "reached after" in result.stdout

    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    lines, errors = parse_file(str(run_dir / "mllog.txt"), ruleset="6.1.0")
    assert errors == []
    keys = [line.key for line in lines]
    for key in ("init_start", "init_stop", "run_start", "epoch_start", "epoch_stop", "eval_accuracy", "run_stop"):
        assert key in keys
    assert keys.count("eval_accuracy") == len(evals)
    accuracy = [line.value["value"] for line in lines if line.key == "eval_accuracy"]
    assert accuracy == [pytest.approx(e["top1"], abs=1e-6) for e in evals]
    stop = next(line for line in lines if line.key == "run_stop")
    assert stop.value["metadata"]["status"] == "success"
    start = next(line for line in lines if line.key == "run_start")
    time_to_train = next(line for line in lines if line.key == "time_to_train")
    assert time_to_train.value["value"] == pytest.approx((stop.timestamp - start.timestamp) / 1000, abs=2e-3)
    # and passes the checker's common rules (analysis/mllog_check.py): only the submission keys, which
    # system.mllog would set, are missing
    from analysis.mllog_check import check_file

    check = check_file(run_dir / "mllog.txt")
    assert check.compliant and check.errors == [], "\n".join(check.errors)
    assert [line.split(":")[0] for line in check.submission] == [
        "init_stop",
        "submission_org",
        "submission_platform",
        "submission_division",
    ]


@pytest.mark.parametrize(
    "broken",
    [
        ["optim.lr=1e-9", "optim.weight_decay=0"],  # no learning rate
        ["optim.schedule.name=exponential", "optim.schedule.gamma=0.05"],  # the lr gone after a few steps
    ],
    ids=["lr-zero", "schedule-dead"],
)
def test_a_run_that_cannot_learn_never_reaches_the_target(tmp_path, data, broken, ddlbench):
    """The negative controls: the same run with no effective learning rate runs its whole budget."""
    result, run_dir, summary = _run(ddlbench, tmp_path, data, *broken)
    assert summary["target_reached"] is False
    assert summary["time_to_target_s"] is None and summary["samples_to_target"] is None
    assert summary["measured_steps"] == STEP_BUDGET - 2
    assert "not reached" in result.stdout
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert max(e["top1"] for e in evals) < TARGET
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    lines, _ = parse_file(str(run_dir / "mllog.txt"), ruleset="6.1.0")
    assert next(line for line in lines if line.key == "run_stop").value["metadata"]["status"] == "aborted"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["run.target_top1=0.9"], "run.target_top1=0.9 needs a validation set"),
        (["data.val_split=0.2", "run.target_top1=0.9"], "needs evaluations during training"),
        (["data.val_split=0.2", "run.eval_every_epochs=1", "run.target_top1=90"], "must be a fraction in (0, 1]"),
        (["data.val_split=0.2", "run.eval_every_epochs=1", "run.eval_every_steps=5"], "choose one cadence"),
    ],
)
def test_target_errors_are_one_line(tmp_path, data, overrides, message, cli):
    result = cli("run", "loader=native", f"data.path={data}", f"run.root={tmp_path}", *overrides, "--dry-run")
    assert result.returncode != 0 and message in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1, result.stderr
