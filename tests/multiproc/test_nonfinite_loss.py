"""A run whose loss goes NaN or infinite (issue 48): it is named at the end of the run, in summary.json; run.stop_on_nan=true ends it there, failed, on every rank. A learning rate of 1e8 makes
simple_cnn's loss non-finite within a few steps on 2 CPU ranks."""

from __future__ import annotations

from benchmarks.loop import LoopPlan, NonFiniteLoss, phase_of
from tests.conftest import find_run, read_summary

DIVERGING = [
    "model=simple_cnn",
    "model.image_size=32",
    "model.num_classes=10",
    "optim.lr=1e8",
    "run.per_gpu_batch=8",
    "run.warmup_steps=1",
    "run.steps=6",
]


def test_phase_of_names_the_part_of_the_run():
    plan = LoopPlan(warmup_steps=2, measured_steps=3, log_every=0, amp_dtype=None, trailing_steps=2)
    assert [phase_of(s, plan) for s in range(7)] == ["warm-up"] * 2 + ["measured"] * 3 + ["trace window"] * 2
    assert "step 3 (measured phase)" in str(NonFiniteLoss(3, plan))


def test_a_diverged_run_completes_and_names_its_first_nonfinite_step(tmp_path, ddlbench):
    result = ddlbench("run", *DIVERGING, f"run.root={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = read_summary(find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b8-r0"))
    assert summary["status"] == "completed"
    step, phase = summary["nonfinite_loss_step"], summary["nonfinite_loss_phase"]
    assert step >= 0 and phase in ("warm-up", "measured")
    assert f"the loss went non-finite at step {step} ({phase} phase)" in result.stderr
    # `results` marks the cell in its table and says why under it (before: a Python warning only)
    shown = ddlbench("results", str(tmp_path))
    assert shown.returncode == 0, shown.stderr[-3000:]
    header = next(line for line in shown.stdout.splitlines() if "img/s" in line)
    assert "marks" in header.split(), shown.stdout
    assert any(  # the cell's row: its marks column names it (beside others, e.g. shared host on a busy machine)
        "diverged" in line and not line.startswith("diverged:") for line in shown.stdout.splitlines()
    ), shown.stdout
    said = " ".join(shown.stdout.split())
    assert (
        f"diverged: loss non-finite from step {step} ({phase} phase): the training diverged; the throughput stands"
        in said
    ), shown.stdout


def test_stop_on_nan_ends_the_run_failed_at_that_step(tmp_path, ddlbench):
    result = ddlbench("run", *DIVERGING, "run.stop_on_nan=true", f"run.root={tmp_path}")
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith("ddlbench: error:")
    summary = read_summary(find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b8-r0"))
    assert summary["status"] == "failed" and "run.stop_on_nan=true ended the run" in summary["error"]
    # every rank stopped at the same step (one all-reduce a step), none waits for the other in a collective
    assert set(summary["rank_errors"]) == {"0", "1"}
    assert len(set(summary["rank_errors"].values())) == 1
