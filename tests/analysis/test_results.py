"""`ddlbench results` as a new user meets it: launches that died before their first step listed, RUNS_DIR
defaulting to runs/."""

from __future__ import annotations

import shutil

import pytest

from benchmarks import rundir
from tests.analysis.test_cells import write_run

pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")


@pytest.mark.parametrize("files", [(rundir.CONFIG,), (rundir.CONFIG, rundir.META)])
def test_a_launch_that_died_before_its_first_step_is_listed(tmp_path, compose, cli, files):
    """A run directory with config.yaml (and meta.json) but no rank log and no summary: rank 0 wrote them
    and the launch died. Before, config.yaml alone was not seen at all, and with meta.json the reason did
    not say that no step had run."""
    write_run(tmp_path, compose, [], world_size=1)
    done = next((tmp_path / "default").glob("*-r0"))
    died = done.with_name(done.name.removesuffix("-r0") + "-r1")
    died.mkdir()
    for name in files:
        shutil.copy(done / name, died / name)
    out = cli("results", str(tmp_path)).stdout
    assert "not counted (1)" in out and died.name in out
    assert "no step records: the launch died before its first step" in out


def test_runs_dir_defaults_to_runs(tmp_path, compose, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("results")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "ddlbench: error: RUNS_DIR runs is not a directory; pass the folder runs were written to "
        "(run.root, default runs/): ddlbench results DIR"
    ]
    write_run(tmp_path / "runs", compose, [], world_size=1)
    result = cli("results")
    assert result.returncode == 0 and "simple_cnn" in result.stdout, result.stderr
