"""The CPU-sized learning-rate study end to end: `ddlbench campaign run experiment=aach2023_lr_cpu` runs
every cell (3 schedules x 1 and 2 ranks: the global batch grows with the ranks) here, without Slurm, into
the run directories a Slurm job would write; a second call runs nothing; the report holds the study's
section. The JUWELS version plans its 27 cells."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_the_cpu_lr_study_runs_here_and_reports(tmp_path, ddlbench):
    """Slow (56 s on the CI machine): six cells of three epochs each, the study end to end."""
    data = tmp_path / "learn"
    made = ddlbench(
        "data",
        "synth",
        "--out",
        str(data),
        "--classes",
        "10",
        "--per-class",
        "30",
        "--width",
        "32",
        "--height",
        "32",
        "--quiet",
    )
    assert made.returncode == 0, made.stderr
    study = [
        "experiment=aach2023_lr_cpu",
        f"data.path={data}",
        f"run.root={tmp_path}/runs",
        "campaign.gpus=[1,2]",
        "run.epochs=3",
    ]
    dry = ddlbench("campaign", "run", *study, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "would run 6 cell(s) here" in dry.stdout and "optim.schedule.name=cosine" in dry.stdout
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing

    ran = ddlbench("campaign", "run", *study)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "ran 6 of 6 cell(s) here" in ran.stdout
    runs = sorted((tmp_path / "runs" / "aach2023_lr_cpu").glob("*/summary.json"))
    assert len(runs) == 6
    seen = set()
    for path in runs:
        summary = json.loads(path.read_text())
        assert summary["status"] == "completed"
        evals = [json.loads(line) for line in (path.parent / "eval.jsonl").read_text().splitlines()]
        assert [e["epochs"] for e in evals] == [1.0, 2.0, 3.0]  # one evaluation per epoch
        assert (path.parent / "mllog.txt").is_file()
        import yaml

        config = yaml.safe_load((path.parent / "config.yaml").read_text())
        seen.add((config["optim"]["schedule"]["name"], summary["global_batch"]))
    assert seen == {(s, b) for s in ("step", "cosine", "exponential") for b in (16, 32)}

    again = ddlbench("campaign", "run", *study)
    assert again.returncode == 0 and "ran 0 of 0 cell(s) here, 6 were already completed" in again.stdout

    report = ddlbench("report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"), "--formats", "png")
    assert report.returncode == 0, report.stderr[-2000:]
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Validation accuracy" in text


def test_the_juwels_lr_study_plans(tmp_path, cli):
    env = {"DDLBENCH_IMAGENET": str(tmp_path), "DDLBENCH_IMAGENET_VAL": str(tmp_path)}
    plan = cli("campaign", "plan", "experiment=aach2023_lr", "system=juwels_booster", env=env)
    assert plan.returncode == 0, plan.stderr[-2000:]
    # the empty folder feeds no step: each cell says so, as `campaign submit` would (issue 49)
    assert "27 cells: 27 impossible" in plan.stdout and f"data.path={tmp_path} holds no images" in plan.stdout
