"""What a run that failed or hung leaves behind, written by its supervisor (launchers/lifecycle/supervise.py): the
one `ddlbench: error:` line naming the rank that went first and where, the fault log kept beside the run, and
the failed or hung summary.json when no rank could write one."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.rundir import run_files, summary_schema
from launchers.lifecycle import watchdog

if TYPE_CHECKING:
    from launchers.lifecycle.supervise import _Output


def drop_empty_stacks(run_dir: Path) -> None:
    """The stacks files of ranks that were killed before they dumped anything (launchers/lifecycle/watchdog.py)."""
    for stacks in run_dir.glob("stacks_rank*.txt"):
        try:
            if stacks.stat().st_size == 0:
                stacks.unlink()
        except OSError:
            pass


# a rank's error that only says a peer went away (gloo, NCCL, MPI): the cause is another rank's
PEER_GONE = re.compile(r"closed by peer|connection reset|remote worker|broken pipe|communicator was aborted", re.I)


def fault_text(run_dir: Path, *, rank0_error: str | None, written: bool, output: _Output | None) -> str:
    """What failed where, in one line: the rank whose own error caused it (not one that only lost its peer),
    with its host and its last logged step, or the rank that ended without a word (killed); whether the run is
    marked failed; and where the logs and the hidden output are."""
    errors = _rank_errors(run_dir)
    if rank0_error and "0" not in errors:
        errors = {"0": rank0_error, **errors}
    own = [int(r) for r, e in errors.items() if not PEER_GONE.search(e)]
    logs = sorted(int(p.stem[4:]) for p in run_dir.glob("rank*.jsonl") if p.stem[4:].isdigit())
    # a rank that wrote no end record and whose error nobody has: killed before it could say anything
    silent = [r for r in logs if summary_schema.read_end_record(run_dir, r) is None and str(r) not in errors]
    if own or (errors and not silent):
        rank = (own or [int(r) for r in errors])[0]
        what = " ".join(errors[str(rank)].splitlines()[0].split())[:300]
    else:
        # several silent: the one the launcher saw die of a signal (not its own SIGTERM to the others), else the
        # one killed first, which stopped logging first (the others went on to the step that waited for it)
        signalled = _signalled_pids(output)
        rank = (
            min(silent, key=lambda r: (_rank_pid(run_dir, r) not in signalled, _stopped_at(run_dir, r)))
            if silent
            else None
        )
        what = "ended without an error of its own (killed: the out-of-memory killer, a signal, or its host went away)"
    who = "the run"
    if rank is not None:
        host, step = _rank_place(run_dir, rank)
        who = f"rank {rank} on {host or 'an unknown host'}" + (f", after step {step}" if step is not None else "")
    marked = "the run is marked failed" if written else "no summary could be written: the next launch retries the run"
    log = _kept_output(run_dir, output)
    return f"{who}: {what}; {marked}; logs in {run_dir}" + (f" (the ranks' output: {log})" if log else "")


# a launcher's word that a process died of a signal, other than the SIGTERM it sends the others: torchrun's
# "failed (exitcode: -9) local_rank: 1 (pid: 123)" and "Signal 9 (SIGKILL) received by PID 123", mpirun's
# "process rank 1 with PID 123 on node n exited on signal 9 (Killed)"
SIGNALLED = re.compile(
    r"exitcode: -(?!15\b)\d+.*?pid: (\d+)|Signal (?!15\b)\d+ \(\w+\) received by PID (\d+)"
    r"|PID (\d+) on node \S+ exited on signal (?!15\b)\d+",
    re.I,
)


def _signalled_pids(output: _Output | None) -> set[int]:
    """The pids the launcher's kept output says died of a signal (SIGNALLED)."""
    if output is None:
        return set()
    text = b"".join(output.unwritten).decode(errors="replace")
    if output.log_path is not None:
        try:
            text += output.log_path.read_text(errors="replace")
        except OSError:
            pass
    return {int(next(g for g in m.groups() if g)) for m in SIGNALLED.finditer(text)}


def _rank_pid(run_dir: Path, rank: int) -> int | None:
    """A rank's pid, from its log's header."""
    try:
        with open(run_dir / f"rank{rank}.jsonl", "rb") as f:
            return int(json.loads(f.readline())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _stopped_at(run_dir: Path, rank: int) -> tuple[int, float]:
    """When a rank stopped logging: its last logged step (-1: none), then its log's last write."""
    step = _rank_place(run_dir, rank)[1]
    try:
        written = (run_dir / f"rank{rank}.jsonl").stat().st_mtime
    except OSError:
        written = 0.0
    return (-1 if step is None else step, written)


def _rank_place(run_dir: Path, rank: int) -> tuple[str | None, int | None]:
    """(host, the last step it logged) of a rank, from its log's header and last line."""
    import json

    host = step = None
    try:
        with open(run_dir / f"rank{rank}.jsonl", "rb") as f:
            host = json.loads(f.readline()).get("host")
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            for line in reversed(f.read().splitlines()):
                try:
                    step = int(json.loads(line)["step"])
                    break
                except (ValueError, KeyError, TypeError):
                    continue
    except (OSError, ValueError, AttributeError):
        pass
    return host, step


def _kept_output(run_dir: Path, output: _Output | None) -> Path | None:
    """Where the hidden output is: the run's fault log, or, when the run directory took none of it, a file
    under ~/.cache/ddlbench/logs/ (None: nothing was hidden)."""
    if output is None:
        return None
    if not output.unwritten:
        return output.log_path
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddlbench" / "logs"
    path = cache / f"{run_dir.name}.{time.strftime('%Y%m%dT%H%M%S')}.log"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(output.unwritten))
    except OSError:
        return None
    return path


def write_up_hang(run_dir: Path, summary: dict | None, hang: dict, *, extra: dict) -> int:
    """The `hung` summary (where each rank was; a rank's own error, if it wrote one, beside it) and one line."""
    import json

    try:
        meta = json.loads((run_dir / run_files.META).read_text())
        processes = int(meta.get("num_processes") or meta["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        processes = None
    text = watchdog.hang_text(hang["mark"], hang["ranks"], num_processes=processes)
    if hang["mark"].get("noticed_by") == "supervisor":
        text += "; seen by the supervisor: the rank's progress beat stopped (frozen: no watchdog of its own runs)"
    kept = {"rank_error": summary["error"]} if summary and summary.get("error") else {}
    try:
        run_files.write_json_atomic(
            run_dir / run_files.SUMMARY, summary_schema.hung_summary(text, ranks=hang["ranks"], **kept, **extra)
        )
    except OSError:
        pass  # a full disk: the run stays without a summary, which the next launch retries
    stacks = (
        f"each rank's stacks in {run_dir}/stacks_rank<R>.txt"
        if any(run_dir.glob("stacks_rank*.txt"))
        else "no stacks (a frozen rank cannot dump its own; py-spy reads them where it is installed)"
    )
    print(
        f"ddlbench: error: the run hung: {text}; marked hung, {stacks}; `ddlbench run` with the same overrides "
        "runs the cell again",
        file=sys.stderr,
        flush=True,
    )
    return watchdog.HUNG_EXIT


def write_up_failure(run_dir: Path, summary: dict | None, *, launcher: str, code: int, extra: dict) -> bool:
    """The summary of a run whose launcher exited non-zero while nobody interrupted it, with every rank's own
    error (end_rank<R>.json) beside it: rank 0's may only say that a peer went away.
    - no summary: rank 0 was killed (the out-of-memory killer) or died before it could write one;
    - "interrupted": a rank failed and the launcher stopped the others (torchrun and mpirun send SIGTERM),
      so it is a failure;
    - "failed": kept, with the ranks' errors added.
    Whether the run has a summary now (a full disk may take none)."""
    errors = _rank_errors(run_dir)
    first = next(iter(errors.items()), None)
    cause = f"rank {first[0]}: {first[1]}" if first else None
    if summary is None:
        text = (
            f"{launcher} exited with code {code} and no rank wrote a summary (rank 0 was killed, e.g. by the "
            "out-of-memory killer, or died before it could)" + (f"; {cause}" if cause else "")
        )
        record = summary_schema.failed_summary(text, rank_errors=errors, **extra)
    elif summary.get("status") == "interrupted":
        text = f"{launcher} exited with code {code}: {cause or 'a rank failed'}; the launcher stopped the other ranks"
        record = summary_schema.failed_summary(text, rank_errors=errors, **extra)
    elif summary.get("status") == "failed" and errors and "rank_errors" not in summary:
        record = {**summary, "rank_errors": errors}
    else:
        return True
    try:
        run_files.write_json_atomic(run_dir / run_files.SUMMARY, record)
    except OSError:
        return summary is not None  # a full disk: the summary a rank wrote stands, or there is none
    return True


def _rank_errors(run_dir: Path) -> dict[str, str]:
    """{rank: error} of the ranks whose end record holds an error other than being stopped
    (KeyboardInterrupt: Ctrl-C or the launcher's SIGTERM), in rank order."""
    import json

    errors = {}
    for path in sorted(run_dir.glob("end_rank*.json"), key=lambda p: int(p.stem.removeprefix("end_rank") or 0)):
        try:
            error = json.loads(path.read_text()).get("error")
        except (OSError, ValueError):
            continue
        if error and not error.startswith("KeyboardInterrupt"):
            errors[path.stem.removeprefix("end_rank")] = error
    return errors
