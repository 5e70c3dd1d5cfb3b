"""Faults of a campaign on one machine, with real launches (docs/reliability.md): a launch killed with
SIGKILL (its whole process group, as a dead node or Slurm's kill after the time limit leaves it) is a
`dead` run that the same command moves into attic/ with its reason and runs again; a live run's directory is
never touched; a second launch of a live cell takes the next repeat, or, with run.repeat fixed, is refused
in one line naming the owner; two `campaign run` of one campaign share its cells; `run -m` resumes a sweep.

The long runs train for ever (run.steps=1000000) until the test stops them; each case takes seconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.rundir import run_files
from launchers.lifecycle import liveness, rundir_state
from tests.conftest import REPO
from tests.longrun import LONG

SHORT = ["model=simple_cnn", "run.steps=2", "run.warmup_steps=1", "run.log_every=0", "run.per_gpu_batch=2"]


def start(root: Path, *overrides: str, args: tuple[str, ...] = ("run",)) -> subprocess.Popen:
    """`ddlbench ARGS OVERRIDES` in a process group of its own (as a terminal starts it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ddlbench.cli", *args, *overrides, f"run.root={root}"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(predicate, *, what: str, timeout_s: float = 90):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {timeout_s} s")


def training(campaign: Path, *, repeat: int = 0) -> Path | None:
    """The run directory of repeat `repeat` once its rank 0 has logged a step."""
    for run_dir in campaign.glob(f"*-r{repeat}"):
        log = run_dir / "rank0.jsonl"
        if log.exists() and '"step_s"' in log.read_text():
            return run_dir
    return None


def processes_in(run_dir: Path) -> list[str]:
    return [p for p in os.popen("ps -eo args").read().splitlines() if str(run_dir) in p]


def stop(process: subprocess.Popen) -> str:
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=60)[1]


def test_a_launch_killed_outright_is_dead_and_the_same_command_retries_it(tmp_path, rank_processes):
    first = start(tmp_path, *LONG)
    run_dir = wait_for(lambda: training(tmp_path / "default"), what="training step")
    os.killpg(first.pid, signal.SIGKILL)  # ddlbench run's whole process group, no clean-up
    first.communicate(timeout=30)
    # nothing trains on without its owner: the launcher's group goes with it, and its ranks
    wait_for(lambda: not processes_in(run_dir), what="end of the orphaned launcher and ranks", timeout_s=20)
    assert not (run_dir / run_files.SUMMARY).exists()
    life = rundir_state.life(run_dir)
    assert rundir_state.state(run_dir) == "dead" and "is gone" in life.reason, life

    retry = start(tmp_path, *LONG)
    wait_for(
        lambda: training(tmp_path / "default") and (liveness.read_owner(run_dir) or {}).get("pid") == retry.pid,
        what="the retry's training step",
    )
    err = stop(retry)
    assert f"{run_dir.name} was dead (its launching process (pid {first.pid}" in err, err[-3000:]
    (kept,) = (tmp_path / "default" / rundir_state.ATTIC).iterdir()
    assert kept.name.startswith(run_dir.name) and not (kept / run_files.SUMMARY).exists()
    assert "dead: its launching process" in (kept / rundir_state.ATTIC_REASON).read_text()
    assert json.loads((run_dir / run_files.SUMMARY).read_text())["status"] == "interrupted"


def test_a_second_launch_of_a_live_cell_takes_the_next_repeat_or_is_refused_in_one_line(
    tmp_path, rank_processes, ddlbench
):
    first = start(tmp_path, *LONG)
    try:
        run_dir = wait_for(lambda: training(tmp_path / "default"), what="training step")
        before = sorted(p.name for p in run_dir.iterdir())

        refused = ddlbench("run", *LONG, f"run.root={tmp_path}", "run.repeat=0")
        assert refused.returncode == 2, refused.stderr[-3000:]
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith(f"ddlbench: error: run directory {run_dir} is in use: held by pid {first.pid} on ")
        assert "heartbeat" in line and "Traceback" not in refused.stderr

        second = ddlbench("run", *LONG, f"run.root={tmp_path}", "--dry-run")  # no repeat given
        assert second.returncode == 0 and f"{run_dir.name[:-3]}-r1" in second.stdout, second.stderr[-2000:]
        assert f"{run_dir.name} is running elsewhere (held by pid {first.pid}" in second.stderr
        assert sorted(p.name for p in run_dir.iterdir()) == before  # the live run is not touched
        assert rundir_state.state(run_dir) == "running"
    finally:
        stop(first)


def test_two_launches_at_once_one_gets_the_directory_the_other_the_next_repeat(tmp_path, rank_processes):
    """No sleep between them: the exclusive owner.json decides, never two processes in one directory."""
    a, b = start(tmp_path, *LONG), start(tmp_path, *LONG)
    try:
        wait_for(lambda: training(tmp_path / "default", repeat=0), what="r0 training")
        wait_for(lambda: training(tmp_path / "default", repeat=1), what="r1 training")
        owners = {liveness.read_owner(d)["pid"] for d in (tmp_path / "default").glob("*-r[01]")}
        assert owners == {a.pid, b.pid}
    finally:
        errs = [stop(a), stop(b)]
    assert not any("already holds a run" in e or "Traceback" in e for e in errs), errs


def test_two_campaign_runs_share_the_cells(tmp_path, rank_processes):
    """The second `campaign run` of one campaign, started while the first trains its first (long) cell, leaves
    that cell to it and runs the other (short) one; neither reports a failure."""
    grid = ["experiment=slurm_smoke", "campaign.gpus=[1]", "campaign.axes.run.steps=[3000,2]"]
    first = start(tmp_path, *grid, args=("campaign", "run"))
    wait_for(lambda: training(tmp_path / "slurm_smoke"), what="the first cell's first step")
    second = start(tmp_path, *grid, args=("campaign", "run"))
    out2, err2 = second.communicate(timeout=120)
    out1, err1 = first.communicate(timeout=180)
    assert first.returncode == 0 and second.returncode == 0, (out1, err1[-2000:], out2, err2[-2000:])
    assert "ran 1 of 1 cell(s) here" in out2 and "running elsewhere: 1" in out2, (out2, err2[-2000:])
    assert "failed" not in out1 + out2, (out1, out2)
    states = sorted(rundir_state.state(d) for d in (tmp_path / "slurm_smoke").glob("*-r0"))
    assert states == ["completed", "completed"], states


def dead_run_at(run_dir: Path) -> None:
    """What a launch killed outright leaves: an owner whose process is gone, a rank log, no summary."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run_dir.mkdir(parents=True)
    owner = {**liveness.owner_record(), "pid": int(gone.stdout), "pid_start": None}
    (run_dir / liveness.OWNER).write_text(json.dumps(owner))
    (run_dir / "rank0.jsonl").write_text('{"kind": "header"}\n')


def test_run_m_resumes_a_sweep(tmp_path, ddlbench):
    """An interrupted sweep (its first combination completed, the second's launch died) resumes with the same
    command: the completed one is skipped with a line, the dead one moved aside and run again."""
    sweep = ["-m", *SHORT[:-1], f"run.root={tmp_path}", "run.per_gpu_batch=2,3"]
    first = ddlbench("run", *sweep[:-1], "run.per_gpu_batch=2")
    assert first.returncode == 0, first.stderr[-2000:]
    (done,) = (tmp_path / "default").glob("*-b2-*-r0")
    shown = ddlbench("run", *SHORT[:-1], "run.per_gpu_batch=3", f"run.root={tmp_path}", "--dry-run")
    dead = Path(shown.stdout.split("run.dir=")[1].split()[0])
    dead_run_at(dead)

    result = ddlbench("run", *sweep)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "multirun 1/2: run.per_gpu_batch=2: completed already (skipped)" in result.stderr, result.stderr[-3000:]
    assert f"{dead.name} was dead (its launching process" in result.stderr
    assert "multirun: 1 of 2 run(s) completed, 1 completed already" in result.stderr
    assert rundir_state.state(done) == "completed" and rundir_state.state(dead) == "completed"
    (kept,) = (tmp_path / "default" / rundir_state.ATTIC).iterdir()
    assert "dead: its launching process" in (kept / rundir_state.ATTIC_REASON).read_text()
