"""Node loss across two namespace hosts without a scheduler (issue 50 item 5, docs/reliability.md): the
second host's rank killed with SIGKILL ends the run in seconds, marked failed, and the same command moves it
into attic/ with its reason and runs the cell again."""

from __future__ import annotations

import json
import os
import signal
import time

from benchmarks.rundir import run_files
from launchers import netns
from launchers.lifecycle import rundir_state
from tests.stash.test_run_hosts_netns import _finish, _rank_pid, _ssh_stand_in, _start


def test_the_second_hosts_rank_killed_ends_the_run_and_the_same_command_retries_it(
    netns_hosts, rank_processes, tmp_path
):
    run_dir = tmp_path / "runs" / "run"
    command = ("framework=ddp", "run.steps=1000000", f"run.dir={run_dir}")
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        _ssh_stand_in(tmp_path, topo)
        proc = _start(topo, tmp_path, *command)
        deadline, pid = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None and not pid:
            pid = (run_dir / "rank1.jsonl").exists() and _rank_pid(run_dir, 1)  # rank 1: the second host's
            time.sleep(0.2)
        assert pid, "rank 1 never started"
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        code, out = _finish(proc, timeout_s=120)
        took_s = time.monotonic() - started
        assert code != 0 and took_s < 30, (took_s, out[-3000:])
        assert json.loads((run_dir / run_files.SUMMARY).read_text())["status"] == "failed"
        assert rundir_state.state(run_dir) == "failed"

        retry = _start(topo, tmp_path, *command)  # the same command
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and retry.poll() is None and not _rank_pid(run_dir, 1):
            time.sleep(0.2)
        os.killpg(retry.pid, signal.SIGINT)
        code, out = _finish(retry, timeout_s=60)
    assert f"{run_dir.name} was failed: moved to" in out, out[-3000:]
    (kept,) = (run_dir.parent / rundir_state.ATTIC).iterdir()
    assert "failed" in (kept / rundir_state.ATTIC_REASON).read_text()
    assert json.loads((kept / run_files.SUMMARY).read_text())["status"] == "failed"
