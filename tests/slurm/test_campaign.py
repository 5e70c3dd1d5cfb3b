"""`ddlbench campaign` on the real local Slurm cluster: plan, submit, status, resubmission."""

from __future__ import annotations

import json
import re

import pytest

from ddlbench.cli import main
from tests.conftest import find_run
from tests.slurm.cluster import wait_for

GRID = ["experiment=slurm_smoke", "system=slurm_cpu"]  # ddp x synthetic x 1, 2 ranks x 1 repeat


def ddlbench(capsys, *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def submitted_jobs(text: str) -> list[str]:
    return re.findall(r"submitted \S+: job (\d+)", text)


def test_plan_names_every_cell_and_the_impossible_ones(capsys):
    out = ddlbench(capsys, "campaign", "plan", *GRID, "campaign.gpus=[1,2,8]")
    assert re.search(r"^ddp-synthetic-simple_cnn-fp32-g1-n1-b8-[0-9a-f]{8}-r0\s+1\s+1\s+1\s+planned", out, re.M), out
    assert re.search(r"^ddp-synthetic-simple_cnn-fp32-g2-n1-b8-[0-9a-f]{8}-r0\s+2\s+1\s+2\s+planned", out, re.M), out
    assert re.search(
        r"^ddp-synthetic-simple_cnn-fp32-g8-n2-b8-[0-9a-f]{8}-r0\s+8\s+2\s+4\s+impossible\s+"
        r"needs 2 nodes but system.max_nodes=1",
        out,
        re.M,
    ), out
    assert "3 cells: 1 impossible, 2 planned; at most 0.3 node-hours, 0.5 rank-hours for 2 job(s)" in out, out


@pytest.mark.slow
def test_submit_as_a_job_array_then_resubmit(slurm_up, tmp_path, monkeypatch, capsys):
    """Cells of one shape go as one job array that Slurm throttles; status follows the tasks through the
    queue, a second submit queues nothing, and the cell whose summary is lost runs again in a job of its own,
    its old directory kept aside. (Plain jobs of a campaign, one per cell, run to the end in
    tests/packaging/test_wheel.py test_a_smoke_campaign_on_slurm_from_the_wheel.)
    Slow (50-70 s on the CI machine): three jobs, the array's two tasks one after another under --max-jobs 1."""
    monkeypatch.chdir(tmp_path)
    grid = [*GRID, "campaign.gpus=[2]", "campaign.repeats=2"]  # two cells of the same shape (1 node x 2 ranks)
    dry = ddlbench(capsys, "campaign", "submit", *grid, "--array", "--max-jobs", "1", "--dry-run")
    assert dry.count("sbatch --parsable") == 1 and "--array=0-1%1" in dry and "--cells=" in dry
    out = ddlbench(capsys, "campaign", "submit", *grid, "--array", "--max-jobs", "1")
    tasks = re.findall(r"submitted (\S+): job (\d+_\d)", out)
    cells = [
        re.fullmatch(rf"ddp-synthetic-simple_cnn-fp32-g2-n1-b8-([0-9a-f]{{8}})-r{r}", cell)
        for r, (cell, _) in zip((0, 1), tasks)
    ]
    assert len(tasks) == 2 and all(cells), out
    assert cells[0][1] == cells[1][1], out  # two repeats of one cell: one cell hash
    assert len({task.split("_")[0] for _, task in tasks}) == 1  # one array
    (cells_file,) = (tmp_path / "runs" / "slurm_smoke" / "slurm").glob("array-*-n1x2.jsonl")
    assert [json.loads(line)[-1] for line in cells_file.read_text().splitlines()] == ["run.repeat=0", "run.repeat=1"]
    for _, task in tasks:
        assert wait_for(task)["JobState"] == "COMPLETED"
    status = ddlbench(capsys, "campaign", "status", *grid)
    assert status.strip().endswith("2 cells: 2 completed"), status
    again = ddlbench(capsys, "campaign", "submit", *grid, "--array")
    assert "submitted 0, 0 already queued, 2 completed" in again

    # a lost summary makes exactly that cell run again; the old directory is kept aside
    cell = find_run(tmp_path / "runs" / "slurm_smoke", "ddp-synthetic-simple_cnn-g2-n1-b8-r1")
    (cell / "summary.json").unlink()
    assert re.search(
        r"\sdead\s+its launching process \(pid \d+ on \S+\) is gone", ddlbench(capsys, "campaign", "status", *grid)
    )
    third = main(["campaign", "submit", *grid])
    out = capsys.readouterr()
    assert third == 0 and re.findall(r"submitted (\S+): job", out.out) == [cell.name], out
    assert "was dead (its launching process" in out.err
    assert wait_for(submitted_jobs(out.out)[0])["JobState"] == "COMPLETED"
    assert json.loads((cell / "summary.json").read_text())["status"] == "completed"
    assert len(list((tmp_path / "runs" / "slurm_smoke" / "slurm" / "attic").iterdir())) == 1
    assert ddlbench(capsys, "campaign", "status", *grid).strip().endswith("2 cells: 2 completed")


def test_max_jobs_holds_back_the_rest(slurm_up, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = ddlbench(capsys, "campaign", "submit", *GRID, "--max-jobs", "1", "--dry-run")
    assert out.count("sbatch --parsable") == 1 and "1 held back by --max-jobs 1" in out
    assert not (tmp_path / "runs").exists()


def test_campaign_without_experiment_is_one_line(capsys):
    assert main(["campaign", "plan", "system=slurm_cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ddlbench: error: campaign needs experiment=<name>; choose one of:") and "\n" not in err
    assert main(["campaign", "plan", "experiment=smoke", "system=slurm_cpu"]) == 2
    assert "experiment=smoke has no campaign: section" in capsys.readouterr().err
