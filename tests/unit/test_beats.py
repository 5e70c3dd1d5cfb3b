"""The supervisor's judge of the ranks' progress beats (launchers/lifecycle/beats.py) without a run: a record
that stops changing is frozen after its limit, two beat periods and the grace, on the judge's own clock
(another host's clock is never compared with it); an ended, hung or gone rank is not frozen; what hang.json
and the hung summary say of frozen ranks. The real cases (the only CPU rank SIGSTOPped; every rank of one
namespace host SIGSTOPped) are tests/multiproc/test_faults_hang.py and tests/stash/test_multinode_netns.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess

from launchers.lifecycle import beats, watchdog


def record(*, beat: float, since: float = 100.0, **more) -> dict:
    return {"host": "b", "pid": 2, "step": 7, "phase": "forward", "beat": beat, "since": since,
            "beat_every_s": 0.5, "limit_s": 3.0, "hung": False, **more}  # fmt: skip


def test_a_record_that_stops_changing_is_frozen_after_its_limit_two_beats_and_the_grace():
    judge = beats.BeatJudge()
    after = beats.silent_after_s(record(beat=0))
    assert after == 3.0 + 2 * 0.5 + beats.GRACE_S
    assert judge.look({0: record(beat=1e9)}, now=10.0) == {}  # first sight: the clock starts
    assert judge.look({0: record(beat=1e9)}, now=10.0 + after - 0.1) == {}
    assert judge.look({0: record(beat=1e9)}, now=10.0 + after + 1) == {0: after + 1}


def test_a_beating_record_is_never_frozen_whatever_its_clock_says():
    judge = beats.BeatJudge()
    # another host's clock an hour behind: only a change of content counts
    for i in range(100):
        assert judge.look({0: record(beat=-3600.0 + i)}, now=float(i * 2)) == {}


def test_ended_hung_and_gone_ranks_are_not_frozen():
    judge = beats.BeatJudge(gone=lambda r: r["pid"] == 3)
    records = {0: record(beat=1, ended=True), 1: record(beat=1, hung=True), 2: record(beat=1, pid=3)}
    judge.look(records, now=0.0)
    assert judge.look(records, now=1000.0) == {}


def test_only_the_silent_rank_of_two_is_frozen():
    judge = beats.BeatJudge()
    judge.look({0: record(beat=1), 1: record(beat=1)}, now=0.0)
    assert judge.look({0: record(beat=20), 1: record(beat=1)}, now=20.0) == {1: 20.0}


def test_gone_here_knows_this_host_s_live_dead_and_zombie_processes():
    here = socket.gethostname()
    assert not beats.gone_here({"host": here, "pid": os.getpid()})
    assert not beats.gone_here({"host": "elsewhere.invalid", "pid": 1})  # another host's: not seen from here
    child = subprocess.Popen(["true"])
    while True:  # a zombie until reaped
        try:
            with open(f"/proc/{child.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
    assert beats.gone_here({"host": here, "pid": child.pid})
    child.wait()
    assert beats.gone_here({"host": here, "pid": child.pid})


def test_the_mark_and_the_view_read_each_rank_s_time_on_its_own_clock():
    records = {0: record(beat=5000.0, since=4990.0, host="a", pid=1), 1: record(beat=1e9, since=1e9 - 2)}
    frozen = {0: 9.0}
    mark = beats.frozen_mark(records, frozen)
    assert mark["rank"] == 0 and mark["noticed_by"] == "supervisor" and mark["stuck_s"] == 19.0
    assert mark["limit_s"] == 3.0 and mark["frozen_ranks"] == [0] and (mark["step"], mark["phase"]) == (7, "forward")
    view = beats.frozen_view(watchdog.where_ranks_were(records, at=1e9), records, frozen)
    assert view["0"]["answered"] is False and view["0"]["in_phase_s"] == 19.0 and view["0"]["silent_s"] == 9.0
    assert view["1"]["answered"] is True and "silent_s" not in view["1"]
    text = watchdog.hang_text(mark, view, num_processes=2)
    assert text.startswith("no step advanced for 19 s (limit 3 s, run.hang_timeout_s): rank 0 (a) at step 7")


def test_notice_writes_hang_json_once_a_rank_is_frozen(tmp_path):
    path = tmp_path / "progress_rank0.json"
    path.write_text(json.dumps(mine := record(beat=1.0, host="elsewhere.invalid")))
    judge = beats.BeatJudge()
    assert beats.notice(tmp_path, judge) is None
    content, seen = judge._seen[0]
    judge._seen[0] = (content, seen - beats.silent_after_s(mine) - 1)  # its beat stopped a while ago
    hang = beats.notice(tmp_path, judge)
    assert hang["ranks"]["0"]["answered"] is False and hang["mark"]["rank"] == 0
    assert watchdog.hang_noticed(tmp_path)["noticed_by"] == "supervisor"
