"""The supervisor's judge of the ranks' progress beats: a rank whose progress_rank<R>.json has not changed for
longer than its hang limit, its beat period and a grace is frozen (SIGSTOPped, its host stuck on a dead
mount, a call that holds the GIL), as torch.distributed.elastic's agent judges its workers from outside.

Why from outside: a rank's own watchdog (launchers/lifecycle/watchdog.py) is a thread of that rank, so it
notices a stuck collective but nothing when its own process is frozen; when the only rank, or every rank of
a host, is frozen, no live peer is left to notice. The supervisor (launchers/lifecycle/supervise.py) sees the
run directory and reads every rank's record.

Clocks: a record written on another host carries that host's time.time(). The judge never compares it
with its own: it notes, on its own monotonic clock, when it last saw a record's content change (the
watchdog rewrites `beat` every `beat_every_s` seconds while its process runs). What is assumed: a rewrite on
another host is visible here within GRACE_S (each read opens the file afresh; a shared file system that
holds a writer's data longer, unflushed, makes a live rank look frozen), and a rank's own fields (`beat`,
`since`) come from one clock, so `beat - since` is its time in a phase.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.rundir import run_files
from launchers.lifecycle import watchdog

# beyond the limit and two beat periods: a loaded host's late beat, a shared file system's delay
GRACE_S = 5.0


def silent_after_s(record: Mapping) -> float:
    """How long a record may stay unchanged before its rank is frozen: its limit in force, two beat periods
    (the beat it skipped and the one it was writing) and GRACE_S."""
    limit_s = float(record.get("limit_s") or 0.0)
    every_s = float(record.get("beat_every_s") or 5.0)
    return limit_s + 2 * every_s + GRACE_S


def _content(record: Mapping) -> tuple:
    return tuple(record.get(k) for k in ("pid", "beat", "step", "phase", "since", "hung", "ended"))


@dataclass
class BeatJudge:
    """Sees the ranks' records at each `look` and says which ranks are frozen: those whose record has not
    changed for silent_after_s (on `now`, the caller's monotonic clock), not ended (its watchdog stopped
    with the rank's end: run_files.PROGRESS_FIELDS `ended`) and not hung (its own watchdog saw a hang and
    is handling it). `gone(record)` says a rank's process is gone (judged by the launcher's failure path,
    not here)."""

    gone: Callable[[Mapping], bool] = field(default=lambda record: False)
    _seen: dict[int, tuple[tuple, float]] = field(default_factory=dict)

    def look(self, records: Mapping[int, Mapping], *, now: float) -> dict[int, float]:
        """{rank: seconds its record has been unchanged} of the frozen ranks, after noting what changed."""
        frozen = {}
        for rank, record in records.items():
            content = _content(record)
            seen = self._seen.get(rank)
            if seen is None or seen[0] != content:
                self._seen[rank] = (content, now)
                continue
            silent_s = now - seen[1]
            if record.get("ended") or record.get("hung") or silent_s <= silent_after_s(record):
                continue
            if not self.gone(record):
                frozen[rank] = silent_s
        return frozen


def gone_here(record: Mapping) -> bool:
    """A rank of this host whose process is gone (or a zombie: killed, not yet reaped); False for another
    host's rank (its process cannot be seen from here)."""
    if record.get("host") != socket.gethostname() or not isinstance(record.get("pid"), int):
        return False
    try:
        with open(f"/proc/{record['pid']}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return not _exists(record["pid"])
    return state in ("Z", "X")


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def frozen_mark(records: Mapping[int, Mapping], frozen: Mapping[int, float]) -> dict:
    """What the supervisor records in hang.json for frozen ranks: the one frozen longest, its step and phase,
    how long it made no progress (its time in the phase on its own clock, then its silence on ours) and its
    limit; `noticed_by: supervisor`."""
    rank = max(frozen, key=lambda r: frozen[r])
    record = records[rank]
    beat, since = float(record.get("beat") or 0.0), float(record.get("since") or 0.0)
    return {
        "rank": rank,
        "host": record.get("host"),
        "step": record.get("step"),
        "phase": record.get("phase"),
        "stuck_s": round(max(0.0, beat - since) + frozen[rank], 1),
        "limit_s": record.get("limit_s"),
        "noticed_by": "supervisor",
        "frozen_ranks": sorted(frozen),
    }


def frozen_view(where: Mapping[str, Mapping], records: Mapping[int, Mapping], frozen: Mapping[int, float]) -> dict:
    """watchdog.where_ranks_were's view with the judge's word on each rank: a frozen one did not answer, and
    its seconds in the phase and of silence are read without comparing clocks; the others answered."""
    out = {}
    for rank, w in where.items():
        w = dict(w)
        silent_s = frozen.get(int(rank))
        w["answered"] = silent_s is None
        if silent_s is not None:
            record = records[int(rank)]
            beat, since = float(record.get("beat") or 0.0), float(record.get("since") or 0.0)
            w["in_phase_s"] = round(max(0.0, beat - since) + silent_s, 1)
            w["silent_s"] = round(silent_s, 1)
        out[rank] = w
    return out


def notice(run_dir: Path, judge: BeatJudge) -> dict | None:
    """One look at the run directory's progress records: None while no rank is frozen; else the hang as the
    supervisor writes it up ({"mark", "ranks"}: fault_report.write_up_hang), after creating hang.json (unless
    a rank's watchdog did first), reading the frozen ranks' stacks with py-spy where it is installed and
    asking this host's answering ranks to dump theirs (watchdog.DUMP_SIGNAL)."""
    records = run_files.read_progress(run_dir)
    frozen = judge.look(records, now=time.monotonic())
    if not frozen:
        return None
    mark = frozen_mark(records, frozen)
    try:
        with open(Path(run_dir) / watchdog.HANG_MARK, "x") as f:
            json.dump(mark, f)
    except OSError:
        pass
    where = frozen_view(watchdog.where_ranks_were(records, at=time.time()), records, frozen)
    watchdog.spy_on_silent(run_dir, where)
    for w in where.values():
        if w["answered"] and w.get("host") == socket.gethostname() and isinstance(w.get("pid"), int):
            try:
                os.kill(w["pid"], watchdog.DUMP_SIGNAL)
            except OSError:
                pass
    return {"mark": mark, "ranks": where}


def kill_frozen_here(hang: Mapping) -> None:
    """SIGKILL to the frozen ranks of this host whose process is still there: a stopped process takes no
    SIGTERM, and one outside the launcher's process group (started through `ip netns exec`, ssh) is not
    reached by its kill. Another host's frozen ranks end with their launcher (srun's, ssh's kill)."""
    for w in hang.get("ranks", {}).values():
        if w.get("answered") or gone_here(w) or w.get("host") != socket.gethostname():
            continue
        try:
            os.kill(int(w["pid"]), signal.SIGKILL)
        except (OSError, KeyError, TypeError, ValueError):
            pass
