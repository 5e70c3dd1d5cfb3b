"""launchers/lifecycle/liveness.py and the run states it gives benchmarks/rundir/: who owns a run directory, the
verdict on a directory without a summary (running or dead), the exclusive claim, the heartbeat, and what a
dead run leaves in the attic. Pure and file-level: no process is launched (tests/multiproc/
test_faults_liveness.py launches them)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.rundir import run_files, summary_schema
from launchers.lifecycle import liveness, rundir_state

HERE = socket.gethostname()


def gone_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def judge(owner, *, age_s=1.0, alive=True, ranks_here=(), limit_s=60.0):
    return liveness.judge(
        owner, age_s=age_s, this_host=HERE, alive=lambda pid, start: alive, limit_s=limit_s, ranks_here=ranks_here
    )


def test_an_owner_on_this_host_is_judged_by_its_pid_at_once():
    owner = {"host": HERE, "pid": 123, "pid_start": 9}
    assert judge(owner, alive=True)[0] == "running"
    state, why = judge(owner, alive=False, age_s=0.5)  # a fresh heartbeat does not save a dead pid
    assert state == "dead" and "pid 123" in why and "gone" in why


def test_an_owner_on_another_host_is_judged_by_its_heartbeat_age():
    owner = {"host": "elsewhere", "pid": 123}
    assert judge(owner, alive=False, age_s=59.0)[0] == "running"  # its pid is not ours to look up
    state, why = judge(owner, alive=False, age_s=61.0)
    assert state == "dead" and "no heartbeat" in why and "elsewhere" in why


def test_a_live_rank_here_keeps_a_run_whose_owner_is_gone_running():
    state, why = judge({"host": HERE, "pid": 1}, alive=False, ranks_here=[77])
    assert state == "running" and "77" in why


def test_a_directory_without_an_owner_record_is_judged_by_its_newest_write():
    assert judge(None, age_s=10.0)[0] == "running"
    assert judge(None, age_s=100.0)[0] == "dead"
    assert judge(None, age_s=None)[0] == "dead"


def test_the_limit_comes_from_the_environment_and_a_bad_one_is_one_line():
    assert liveness.dead_after_s({}) == liveness.DEAD_AFTER_S
    assert liveness.dead_after_s({liveness.DEAD_AFTER_ENV: "3"}) == 3.0
    with pytest.raises(liveness.ConfigError, match="DDLBENCH_DEAD_AFTER_S=soon"):
        liveness.dead_after_s({liveness.DEAD_AFTER_ENV: "soon"})


def test_a_claim_is_exclusive_and_names_its_holder(tmp_path):
    run = tmp_path / "run"
    record = liveness.claim(run)
    assert record["pid"] == os.getpid() and record["host"] == HERE
    with pytest.raises(liveness.Taken, match=f"pid {os.getpid()} on {HERE}"):
        liveness.claim(run)
    liveness.release(run)  # a claim that never launched leaves nothing
    assert not run.exists()


def test_a_reused_pid_is_no_owner():
    assert liveness.pid_alive(os.getpid(), liveness._pid_start(os.getpid()))
    assert not liveness.pid_alive(os.getpid(), -1)  # same pid, another start time: another process


def test_the_heartbeat_refreshes_the_owner_record(tmp_path):
    run = tmp_path / "run"
    with liveness.Heartbeat(run, every_s=0.05) as beat:
        old_s = time.time() - 1000
        os.utime(run / liveness.OWNER, (old_s, old_s))
        beat.start()
        time.sleep(0.3)
        assert time.time() - (run / liveness.OWNER).stat().st_mtime < 5
    other = tmp_path / "other"
    other.mkdir()
    (other / liveness.OWNER).write_text(json.dumps({"host": "elsewhere", "pid": 1}))
    with pytest.raises(liveness.Taken, match="pid 1 on elsewhere"), liveness.Heartbeat(other):
        pass


def test_states_of_a_directory_without_a_summary(tmp_path):
    run = tmp_path / "run"
    assert rundir_state.state(run) == "missing"
    liveness.claim(run)
    # this process owns it and is not running it now (campaign run launches cell after cell): dead
    assert rundir_state.state(run) == "dead"
    owner = {"host": HERE, "pid": gone_pid(), "pid_start": None, "started": "then"}
    (run / liveness.OWNER).write_text(json.dumps(owner))
    life = rundir_state.life(run)
    assert life.state == "dead" and "is gone" in life.says() and "heartbeat" in life.says()
    (run / liveness.OWNER).write_text(json.dumps({**owner, "pid": os.getppid()}))  # a live process
    assert rundir_state.state(run) == "running"


def test_a_failed_run_whose_processes_still_end_here_is_not_retried_yet(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    run_files.write_json_atomic(run / run_files.SUMMARY, summary_schema.failed_summary("boom"))
    (run / "rank0.jsonl").write_text(json.dumps({"kind": "header", "host": HERE, "pid": os.getppid()}) + "\n")
    assert rundir_state.state(run) == "running"  # its rank is alive and may still write
    (run / "rank0.jsonl").write_text(json.dumps({"kind": "header", "host": HERE, "pid": 1}) + "\n")
    old_s = liveness._pid_started_s(1) - 100  # pid 1 started after this log was last written: a reused pid
    os.utime(run / "rank0.jsonl", (old_s, old_s))
    assert rundir_state.state(run) == "failed"


def test_a_dead_run_goes_to_the_attic_with_its_reason_and_a_changed_one_stays(tmp_path):
    run = tmp_path / "c" / "run"
    run.mkdir(parents=True)
    (run / liveness.OWNER).write_text(json.dumps({"host": "elsewhere", "pid": 5}))
    (run / "rank0.jsonl").write_text("{}\n")
    old_s = time.time() - 1000
    os.utime(run / liveness.OWNER, (old_s, old_s))
    life = rundir_state.life(run)
    assert life.state == "dead"
    (run / liveness.OWNER).write_text(json.dumps({"host": "elsewhere", "pid": 6}))  # another launch took it
    assert rundir_state.reap(run, tmp_path / "c" / rundir_state.ATTIC, life) is None and run.exists()
    life = rundir_state.life(run)
    os.utime(run / liveness.OWNER, (old_s, old_s))
    life = rundir_state.life(run)
    moved = rundir_state.reap(run, tmp_path / "c" / rundir_state.ATTIC, life)
    assert moved is not None and not run.exists()
    reason = (moved / rundir_state.ATTIC_REASON).read_text()
    assert "dead: no heartbeat from pid 6 on elsewhere" in reason and f"pid {os.getpid()} on {HERE}" in reason


def test_a_run_whose_slurm_job_ended_is_dead_at_once(tmp_path, monkeypatch):
    """Its owner was on another node (no pid to look up, a fresh heartbeat): what Slurm says of the job wins."""
    from launchers import scheduler, submit

    run = tmp_path / "run"
    run.mkdir()
    (run / liveness.OWNER).write_text(json.dumps({"host": "n17", "pid": 5, "slurm_job_id": "77"}))
    monkeypatch.setattr(scheduler, "available", lambda: True)
    monkeypatch.setattr(scheduler, "final_state", lambda job: {"77": "RUNNING"}.get(job))
    assert submit.run_state(run)[0] == "running"
    monkeypatch.setattr(scheduler, "final_state", lambda job: {"77": "NODE_FAIL"}.get(job))
    state, life = submit.run_state(run)
    assert state == "dead" and "its Slurm job 77 ended (NODE_FAIL) without a summary" in life.says()


def test_a_slurm_job_of_a_cell_held_elsewhere_is_refused_in_one_line_naming_the_owner(tmp_path, capsys):
    """An overlapping resubmit: the job's launch finds the cell's directory held by a live run."""
    import re

    from launchers import slurm

    environ = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "vm"}
    overrides = ["system=slurm_cpu", f"run.root={tmp_path}", "run.campaign=t"]
    assert slurm.launch(overrides, dry_run=True, environ=environ) == 0
    run = Path(re.search(r"run\.dir=(\S+)", capsys.readouterr().out)[1])
    run.mkdir(parents=True)
    (run / liveness.OWNER).write_text(json.dumps({"host": HERE, "pid": os.getppid(), "slurm_job_id": "6"}))
    with pytest.raises(liveness.ConfigError, match=rf"is in use: held by pid {os.getppid()} on {HERE} \(Slurm job 6\)"):
        slurm.launch(overrides, dry_run=True, environ=environ)


def test_a_rank_whose_launcher_is_gone_stops(tmp_path, rank_processes):
    """exit_when_orphaned: the grandchild outlives its parent by a poll, not by its whole training."""
    ready = tmp_path / "ready"
    rank = (
        "import pathlib, time; from benchmarks import liveness; liveness.exit_when_orphaned(every_s=0.05, grace_s=1.0); "
        f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    )
    launcher = (  # starts the rank, waits until it watches, says its pid and exits
        "import os, subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', {rank!r}], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        f"[time.sleep(0.05) for _ in range(400) if not os.path.exists({str(ready)!r})]; print(p.pid, flush=True)"
    )
    done = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=60)
    pid = int(done.stdout)  # its launcher has exited: the rank is an orphan now
    deadline = time.monotonic() + 15
    while liveness.pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not liveness.pid_alive(pid)
