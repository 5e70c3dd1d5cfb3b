"""Node loss in a campaign on the real local Slurm cluster (issue 50 item 5, docs/reliability.md): a job
killed mid-run (every process of it SIGKILLed at once, as a dead node leaves it; `scancel --signal=KILL` is a
cancel that SIGTERMs first: an interrupted run) and a job
whose rank is SIGKILLed are shown dead and failed by `campaign status`, `campaign submit` resubmits exactly
those two cells, and the retries complete."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from benchmarks.rundir import run_files
from ddlbench.cli import main
from launchers.lifecycle import rundir_state
from tests.slurm.cluster import wait_for

# two cells (1 and 2 ranks) that train for some seconds: long enough to be killed mid-run
GRID = ["experiment=slurm_smoke", "system=slurm_cpu", "run.steps=5000", "loader.samples_per_epoch=100000"]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def training(run_dir) -> dict | None:
    """Rank 1's (else rank 0's) header once the run has logged a step."""
    for rank in (1, 0):
        log = run_dir / f"rank{rank}.jsonl"
        if log.exists() and '"step_s"' in (text := log.read_text()):
            return json.loads(text.splitlines()[0])
    return None


def wait(predicate, what: str, timeout_s: float = 120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.3)
    raise AssertionError(f"no {what} after {timeout_s} s")


@pytest.mark.slow
def test_killed_jobs_are_shown_dead_or_failed_and_resubmitted_exactly(slurm_up, tmp_path, monkeypatch, capsys):
    """Slow (about 80 s on the CI machine): four jobs of 5000 steps, two killed half way."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "campaign", "submit", *GRID)
    jobs = dict(re.findall(r"submitted (\S+): job (\d+)", out))
    assert code == 0 and len(jobs) == 2, (out, err)
    campaign = tmp_path / "runs" / "slurm_smoke"
    one, two = (next(c for c in jobs if f"-g{g}-" in c) for g in (1, 2))
    wait(lambda: training(campaign / one) and training(campaign / two), "steps in both jobs")

    # every process of the job at once, as a node that dies does (scancel --signal=KILL is a cancel: Slurm sends
    # SIGTERM first and waits KillWait, so the run is marked interrupted, and resubmitted the same way)
    listed = subprocess.run(["scontrol", "listpids", jobs[one]], capture_output=True, text=True, check=True).stdout
    for pid in [int(line.split()[0]) for line in listed.splitlines()[1:]]:
        os.kill(pid, signal.SIGKILL)
    header = training(campaign / two)
    os.kill(header["pid"], signal.SIGKILL)  # one rank of the other job (its pid on this one node)
    for job in jobs.values():
        wait_for(job)
    code, status, _ = run(capsys, "campaign", "status", *GRID)
    assert code == 0
    row = {line.split()[0]: line for line in status.splitlines()[1:-1]}
    assert re.search(r"\sdead\s+(its launching process .* is gone|no heartbeat)", row[one]), status
    assert re.search(r"\sfailed\s", row[two]), status
    assert "incomplete" not in status
    assert not (campaign / one / run_files.SUMMARY).exists()
    assert run_files.read_summary(campaign / two)["status"] == "failed"

    code, out, err = run(capsys, "campaign", "submit", *GRID)
    again = dict(re.findall(r"submitted (\S+): job (\d+)", out))
    assert code == 0 and set(again) == {one, two}, (out, err)
    assert f"{one} was dead (" in err and f"{two} was failed: moved to" in err, err
    for job in again.values():
        assert wait_for(job)["JobState"] == "COMPLETED"
    code, status, _ = run(capsys, "campaign", "status", *GRID)
    assert status.strip().endswith("2 cells: 2 completed"), status
    kept = sorted(p.name.rsplit(".", 1)[0] for p in (campaign / "slurm" / rundir_state.ATTIC).iterdir())
    assert kept == sorted([one, two])
