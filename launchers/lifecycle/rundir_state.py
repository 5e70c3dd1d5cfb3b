"""A run directory's state: its summary's status, or, without a summary, whether its owner still lives
(`running`, `dead`: launchers/lifecycle/liveness.py); the attic where a retry moves what did not complete.
Nothing is ever written over: a directory that holds a run is refused before launch."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.rundir.run_files import CONFIG, META, SUMMARY, now_iso, read_summary
from launchers.lifecycle import liveness

# what a run moved out of its cell's place into <campaign>/attic/ says (move_aside): when, by whom, why
ATTIC_REASON = "attic_reason.txt"


def holds_a_run(path: Path) -> bool:
    """Anything a run writes is there: it is never written over."""
    return path.is_dir() and any(p.name in (SUMMARY, META, CONFIG) or p.name.startswith("rank") for p in path.iterdir())


ATTIC = "attic"  # <campaign>/attic/: failed or interrupted runs moved out of their cell's place


def move_aside(path: Path, attic: Path, *, reason: str | None = None) -> Path:
    """Move a run directory that did not complete (failed, interrupted, hung, dead) into `attic` as
    <name>.<timestamp> (never lost, never counted in its cell's place), with ATTIC_REASON saying when, by
    whom and why; return where it went."""
    import socket
    import time

    attic.mkdir(parents=True, exist_ok=True)
    target = attic / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}"
    k = 1
    while target.exists():
        k += 1
        target = attic / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}-{k}"
    path.rename(target)
    why = reason or state(target)
    try:
        (target / ATTIC_REASON).write_text(
            f"{now_iso()}: moved from {path} by pid {os.getpid()} on {socket.gethostname()}: {why}\n"
        )
    except OSError:
        pass  # kept without its note (a full disk): the move is what matters
    return target


def life(path: Path) -> liveness.Life:
    """Who holds a run directory without a summary and whether it lives (launchers/lifecycle/liveness.py)."""
    return liveness.examine(path)


def reap(path: Path, attic: Path, dead: liveness.Life) -> Path | None:
    """Move a dead run (`dead`: its life as judged) into `attic` with its reason; None when, looked at again,
    it is not the same dead run any more (another launch took its place meanwhile), so nothing moved."""
    if (path / SUMMARY).exists() or liveness.read_owner(path) != dead.owner:
        return None
    try:
        return move_aside(path, attic, reason=f"dead: {dead.says()}")
    except FileNotFoundError:
        return None  # another launch moved it first


def state(path: Path | None) -> str:
    """completed | failed | interrupted | hung (its summary's status) | running | dead (no summary: whether its
    owner lives, launchers/lifecycle/liveness.py) | missing (no run there)."""
    if path is None or not path.is_dir():
        return "missing"
    if (path / SUMMARY).exists():
        summary = read_summary(path)
        status = None if summary is None else summary.get("status")
        if status != "completed" and liveness.finishing(path):
            return "running"  # its processes here still end (and write): not yet to be moved or retried
        return status if status in ("completed", "interrupted", "hung") else "failed"
    if not taken(path):
        return "missing"
    return life(path).state


def taken(path: Path) -> bool:
    """A run is there, or a launch has claimed the directory (owner.json) for one: no other run goes there."""
    return holds_a_run(path) or (path / liveness.OWNER).exists()
