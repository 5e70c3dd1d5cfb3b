"""`ddlbench results --check-mllog`: MLPerf's compliance checker on the runs that had a target, through the CLI."""

from __future__ import annotations

import json

import pytest

from benchmarks.mllog import MlLog
from benchmarks.rundir import run_files
from tests.analysis.test_cells import write_run

pytest.importorskip("mlperf_logging", reason="needs the mlperf-logging package (the mllog or test extra)")
pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")


def _targeted(root, compose, *, world_size: int) -> None:
    write_run(root, compose, [], world_size=world_size)
    run_dir = next(p for p in (root / "default").iterdir() if f"-g{world_size}-" in p.name)
    summary = json.loads((run_dir / run_files.SUMMARY).read_text())
    run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary | {"target_top1": 0.5, "target_reached": True})
    log = MlLog(run_dir)
    log.start("init_start")
    log.event("submission_benchmark", "resnet")
    log.run_start()
    log.start("epoch_start", epoch_num=1)
    log.end("epoch_stop", epoch_num=1)
    log.run_stop(status="success")
    log.close()


def test_check_mllog_checks_the_targeted_runs_only(tmp_path, compose, cli):
    _targeted(tmp_path, compose, world_size=2)
    write_run(tmp_path, compose, [], world_size=1)  # no target: not checked
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    said = out[out.index("MLLOG compliance") :].splitlines()
    runs = [line for line in said if line.startswith("  ") and not line.startswith("    ")]
    assert len(runs) == 1 and "-g2-" in runs[0] and "not compliant" in runs[0]  # not an MLPerf submission
    assert any("submission_org" in line for line in said)  # the checker's own words


def test_check_mllog_without_targets_says_so(tmp_path, compose, cli):
    write_run(tmp_path, compose, [], world_size=1)
    done = cli("results", str(tmp_path), "--check-mllog")
    assert done.returncode == 0 and "no counted run has a target" in done.stdout
