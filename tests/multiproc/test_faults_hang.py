"""Faults a user meets, with real ranks (issue 50, items 3 and 4; issue 64, item 2): a rank that stops
advancing (SIGSTOP of one of two gloo ranks) ends the run `hung` within run.hang_timeout_s, with every
answering rank's stacks and where each rank was, and the same command runs the cell again; the only rank
SIGSTOPped ends it `hung` too, seen by the supervisor, and leaves no process; a disk that fills up mid-run, a run directory
on a file system that takes no file and a report onto a full disk each end with one line naming what and
where, and no traceback on the terminal. The disk cases mount a small tmpfs (skipped where mounting is not
permitted); the same faults are simulated in tests/unit/test_faults_oneline.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from benchmarks.rundir import run_files
from launchers.lifecycle import rundir_state, watchdog
from tests.conftest import REPO, process_ends_within
from tests.longrun import LONG, start, wait_for_steps

HANG_LIMIT_S = 3


def rank_pid(run_dir: Path, rank: int) -> int:
    return json.loads((run_dir / f"rank{rank}.jsonl").read_text().splitlines()[0])["pid"]


def no_rank_left(run_dir: Path) -> bool:
    return not [p for p in os.popen("ps -eo args").read().splitlines() if str(run_dir) in p]


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs at tmp_path/disk (unmounted afterwards); skipped where this process may not mount."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Write zeros into disk/fill until the file system is full."""
    with open(disk / "fill", "wb") as f:
        try:
            while True:
                f.write(bytes(1 << 20))
                f.flush()
        except OSError:
            pass


def test_a_stopped_rank_ends_the_run_hung_within_its_limit_and_the_same_command_retries_it(
    tmp_path, rank_processes, cli
):
    process = start(tmp_path, f"run.hang_timeout_s={HANG_LIMIT_S}")
    run_dir = wait_for_steps(tmp_path)
    stopped = rank_pid(run_dir, 1)
    os.kill(stopped, signal.SIGSTOP)  # a rank that never answers again: its peer waits in the gradients' allreduce
    start_s = time.monotonic()
    try:
        _, err = process.communicate(timeout=90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped, signal.SIGCONT)  # never left stopped, whatever the test saw
    took_s = time.monotonic() - start_s
    # the limit, a look of the watchdog, its grace for the stacks and the supervisor's before it stops the launcher
    assert process.returncode == watchdog.HUNG_EXIT and took_s < HANG_LIMIT_S + 12, (took_s, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    line = next(line for line in err.splitlines() if line.startswith("ddlbench: error: the run hung"))
    assert "rank 1 (" in line and "did not answer" in line and "stacks_rank" in line, line
    summary = json.loads((run_dir / run_files.SUMMARY).read_text())
    assert summary["status"] == "hung", summary
    where = summary["hung_ranks"]
    assert where["1"]["answered"] is False and where["0"]["answered"] is True, where
    assert where["0"]["phase"] in watchdog.PHASES and where["0"]["step"] >= 1, where
    stacks = (run_dir / "stacks_rank0.txt").read_text()
    assert f"at step {where['0']['step']} in {where['0']['phase']}" in stacks and "loop.py" in stacks, stacks[:2000]
    assert no_rank_left(run_dir)

    listed = cli("results", str(tmp_path / "default"))
    assert listed.returncode == 0 and "hung" in listed.stdout + listed.stderr, listed.stdout + listed.stderr

    retry = start(tmp_path, f"run.hang_timeout_s={HANG_LIMIT_S}")  # the same command
    try:
        attic, deadline = tmp_path / "default" / rundir_state.ATTIC, time.monotonic() + 60
        # moved aside (and said so), then the cell's directory claimed again for the retry
        while not (attic.exists() and (run_dir / "owner.json").exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        retry.send_signal(signal.SIGINT)  # the retry is what this test is about, not its training
        _, err = retry.communicate(timeout=60)
    assert "was hung" in err and "moved to" in err, err[-2000:]
    (kept,) = (tmp_path / "default" / rundir_state.ATTIC).iterdir()
    assert kept.name.startswith(run_dir.name) and rundir_state.state(kept) == "hung"


def test_the_only_rank_stopped_ends_the_run_hung_seen_by_the_supervisor_and_no_process_is_left(
    tmp_path, rank_processes
):
    # no live peer is left whose watchdog could notice: the supervisor judges the rank's progress beat itself
    # (launchers/lifecycle/beats.py)
    process = start(tmp_path, f"run.hang_timeout_s={HANG_LIMIT_S}", "system.ranks_per_node=1")
    run_dir = wait_for_steps(tmp_path, ranks=1)
    deadline = time.monotonic() + 60
    while run_files.read_progress(run_dir).get(0, {}).get("step", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # its beat has told a step: what it last reported is where it stopped
    stopped = rank_pid(run_dir, 0)
    os.kill(stopped, signal.SIGSTOP)
    start_s = time.monotonic()
    try:
        _, err = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped, signal.SIGCONT)
    took_s = time.monotonic() - start_s
    # the limit, two beat periods and beats.GRACE_S of silence, watchdog.GRACE_S before the stop: about 10 s
    # on a quiet machine; the margin is for a loaded one (20 s measured beside four other test runs)
    assert process.returncode == watchdog.HUNG_EXIT and took_s < HANG_LIMIT_S + 40, (took_s, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    line = next(line for line in err.splitlines() if line.startswith("ddlbench: error: the run hung"))
    assert "rank 0 (" in line and "did not answer" in line and "seen by the supervisor" in line, line
    summary = json.loads((run_dir / run_files.SUMMARY).read_text())
    assert summary["status"] == "hung" and summary["error"] in line, summary
    where = summary["hung_ranks"]["0"]
    assert where["answered"] is False and where["pid"] == stopped and where["step"] >= 1, where
    assert where["phase"] in watchdog.PHASES and where["silent_s"] > HANG_LIMIT_S, where
    assert watchdog.hang_noticed(run_dir)["noticed_by"] == "supervisor"
    assert process_ends_within(stopped, seconds=15) and no_rank_left(run_dir)


def test_a_disk_that_fills_up_mid_run_leaves_a_failed_summary_and_one_line(small_disk, rank_processes):
    process = start(small_disk / "runs")
    run_dir = wait_for_steps(small_disk / "runs")
    fill(small_disk)
    _, err = process.communicate(timeout=90)
    assert process.returncode not in (0, None)
    assert "Traceback" not in err and "During handling" not in err, err[-3000:]
    (line,) = [line for line in err.splitlines() if "No space left on device" in line]
    assert (
        line.startswith("ddlbench: error: the run failed: rank ")
        and " on " in line
        and "the run is marked failed" in line
    ), line
    assert f"logs in {run_dir}" in line and "rank" in line.split("No space left on device: ")[1], line
    summary = json.loads((run_dir / run_files.SUMMARY).read_text())  # written into the space reserved at the start
    assert summary["status"] == "failed" and "No space left on device" in json.dumps(summary), summary
    assert not (run_dir / run_files.RESERVE).exists()
    assert no_rank_left(run_dir)


def test_a_killed_rank_is_named_in_one_line_and_its_peer_s_lost_connection_is_not_the_cause(tmp_path, rank_processes):
    process = start(tmp_path)
    run_dir = wait_for_steps(tmp_path)
    os.kill(rank_pid(run_dir, 1), signal.SIGKILL)  # the out-of-memory killer, a dead node
    _, err = process.communicate(timeout=90)
    assert process.returncode not in (0, None)
    assert "Traceback" not in err and "Terminating process" not in err, err[-3000:]
    (line,) = [line for line in err.splitlines() if "the run is marked" in line]
    assert (
        line.startswith("ddlbench: error: the run failed: rank 1 on ")
        and "ended without an error of its own (killed" in line
    ), line
    assert "the run is marked failed" in line and f"logs in {run_dir}" in line, line
    assert run_files.read_summary(run_dir)["status"] == "failed" and not list(run_dir.glob("stacks_rank*.txt"))


def test_a_run_directory_on_a_read_only_file_system_is_refused_in_one_line(small_disk, ddlbench):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    result = ddlbench("run", *LONG, f"run.root={small_disk / 'runs'}")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ddlbench: error: ") and "read-only file system" in last and str(small_disk) in last, last


def test_a_report_onto_a_full_disk_says_one_line(small_disk, cli):
    fill(small_disk)
    result = cli(
        "report", str(REPO / "tests/data/analysis/campaign"), "--out", str(small_disk / "report"), "--jobs", "2"
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "RemoteTraceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ddlbench: error: report: no space left on device: ") and str(small_disk) in last, last
