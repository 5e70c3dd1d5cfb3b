"""Every rank of one namespace host frozen (issue 64 item 2, docs/reliability.md): the second host's rank
SIGSTOPped in a 2-host run without a scheduler (a node stuck on a dead mount, a call that holds the GIL)
ends the run `hung` within run.hang_timeout_s and a few seconds, with what each rank last reported, and
leaves no process behind. Whoever notices first writes hang.json: the first host's rank, whose watchdog sees
its allreduce wait, or the supervisor, which sees the frozen rank's beat stop (launchers/lifecycle/beats.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time

from benchmarks.rundir import run_files
from launchers import netns
from launchers.lifecycle import watchdog
from tests.conftest import process_ends_within
from tests.stash.test_run_hosts_netns import _finish, _rank_pid, _ssh_stand_in, _start

HANG_LIMIT_S = 5


def test_every_rank_of_the_second_host_stopped_ends_the_run_hung(netns_hosts, rank_processes, tmp_path):
    run_dir = tmp_path / "runs" / "run"
    command = ("framework=ddp", "run.steps=1000000", f"run.dir={run_dir}", f"run.hang_timeout_s={HANG_LIMIT_S}")
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        _ssh_stand_in(tmp_path, topo)
        proc = _start(topo, tmp_path, *command)
        deadline, pid = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            pid = pid or _rank_pid(run_dir, 1)  # rank 1: the second host's only rank
            if pid and run_files.read_progress(run_dir).get(1, {}).get("step", 0) >= 2:
                break
            time.sleep(0.2)
        assert pid, "rank 1 never trained"
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        try:
            code, out = _finish(proc, timeout_s=150)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        took_s = time.monotonic() - started
    # about 10 s on a quiet machine; the margin is for a loaded one
    assert code == watchdog.HUNG_EXIT and took_s < HANG_LIMIT_S + 45, (took_s, out[-3000:])
    line = next(line for line in out.splitlines() if line.startswith("ddlbench: error: the run hung"))
    assert "rank 1 (" in line and "did not answer" in line, line
    summary = json.loads((run_dir / run_files.SUMMARY).read_text())
    assert summary["status"] == "hung", summary
    where = summary["hung_ranks"]
    assert where["1"]["answered"] is False and where["1"]["pid"] == pid and where["1"]["step"] >= 2, where
    assert where["0"]["answered"] is True, where
    # measured 2026-12-06 on the loaded 2-core machine: rank 0's watchdog noticed first (its allreduce waited
    # 5.1 s), 14.5 s from the stop to the end; the supervisor's judge would have 7 s later
    assert watchdog.hang_noticed(run_dir)["rank"] in (0, 1)
    assert process_ends_within(pid, seconds=15) and not _rank_pid(run_dir, 0)
