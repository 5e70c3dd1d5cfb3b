"""`ddlbench results --check-mllog`: MLPerf's compliance checker on the runs that had a target, through the CLI."""

from __future__ import annotations

import json

import pytest

from benchmarks.mllog import MlLog, settings_events
from benchmarks.rundir import run_files
from tests.analysis.test_cells import write_run

pytest.importorskip("mlperf_logging", reason="needs the mlperf-logging package (the mllog or test extra)")
pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")


SUBMISSION = [
    "system.mllog.submission_org=ddlbench",
    "system.mllog.submission_platform=1xCPU",
    "system.mllog.submission_division=closed",
]


def _targeted(root, compose, *, world_size: int, overrides: tuple[str, ...] = (), broken: bool = False) -> None:
    """A run with a target whose mllog.txt holds what the app, the loop and the evaluator log, in their order
    (launchers/lifecycle/rank.py, loop.py, evaluate.py); broken: run_start logged before init is over, on purpose."""
    write_run(root, compose, list(overrides), world_size=world_size)
    run_dir = next(p for p in (root / "default").iterdir() if f"-g{world_size}-" in p.name)
    summary = json.loads((run_dir / run_files.SUMMARY).read_text())
    run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary | {"target_top1": 0.5, "target_reached": True})
    cfg = compose(["model=simple_cnn", "run.target_top1=0.5", *overrides])
    log = MlLog(run_dir)
    log.start("init_start")
    settings_events(log, cfg=cfg, global_batch=4 * world_size, train_samples=160, eval_samples=40)
    if broken:
        log.start("run_start")
    log.run_start()
    log.start("epoch_start", epoch_num=1)
    log.start("eval_start", epoch_num=1)
    log.end("eval_stop", epoch_num=1)
    log.event("eval_accuracy", 0.6, epoch_num=1)
    log.end("epoch_stop", epoch_num=1)
    log.run_stop(status="success")
    log.close()


def _said(done) -> list[str]:
    out = done.stdout
    return out[out.index("MLLOG compliance") :].splitlines()


def test_a_run_as_ddlbench_logs_it_passes_the_common_rules(tmp_path, compose, cli):
    """With the profile's submission keys: compliant; only the model's name, not an MLPerf benchmark of the
    ruleset, is listed apart."""
    _targeted(tmp_path, compose, world_size=2, overrides=tuple(SUBMISSION))
    write_run(tmp_path, compose, [], world_size=1)  # no target: not checked
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 0, done.stdout + done.stderr
    said = _said(done)
    runs = [line for line in said if line.startswith("  ") and not line.startswith("    ")]
    assert len(runs) == 1 and "-g2-" in runs[0] and runs[0].endswith(": compliant")
    assert said[-1] == "      submission_benchmark: not one of MLPerf training 6.1.0's benchmarks"
    assert "error" not in done.stdout


def test_without_the_profiles_keys_they_are_listed_apart_not_failed(tmp_path, compose, cli):
    _targeted(tmp_path, compose, world_size=1)
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 0, done.stdout
    said = _said(done)
    assert said[1].endswith(": compliant")
    assert said[2] == (
        "    submission-only (not failures; set system.mllog.submission_org, submission_platform and "
        "submission_division in the site's profile):"
    )
    assert [line.split(":")[0].strip() for line in said[3:]] == [
        "init_stop",
        "submission_org",
        "submission_platform",
        "submission_division",
    ]
    assert "compile_time_mins, is 0 without it" in said[3]


def test_a_log_broken_on_purpose_fails_with_its_error_in_full(tmp_path, compose, cli):
    _targeted(tmp_path, compose, world_size=1, overrides=tuple(SUBMISSION), broken=True)
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 1
    said = _said(done)
    # run_start while init runs, then init_stop after run_start: both in full, the repeat a warning
    assert said[1].endswith(": NOT compliant, 2 error(s)")
    assert said[2].startswith("    error 1: CHECK for 'run_start' failed in line ")
    assert any(line.startswith("    error 2: CHECK for 'init_stop' failed in line ") for line in said)
    assert "    warning: Required EXACTLY_ONE occurrence of 'run_start' but found 2" in said
    full = "\n".join(said)
    assert '"key": "run_start"' in full  # the log line itself
    assert "failed test:  ( s['init_stopped'] == True )" in full and "current context[s]=" in full


def test_check_mllog_without_targets_says_so(tmp_path, compose, cli):
    write_run(tmp_path, compose, [], world_size=1)
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 0 and "no counted run has a target" in done.stdout


def test_a_targeted_run_without_its_file_fails(tmp_path, compose, cli):
    write_run(tmp_path, compose, [], world_size=1)
    (summary_path,) = tmp_path.glob("default/*/summary.json")
    summary = json.loads(summary_path.read_text())
    run_files.write_json_atomic(summary_path, summary | {"target_top1": 0.5, "target_reached": True})
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 1 and "no file: no mllog.txt" in done.stdout
