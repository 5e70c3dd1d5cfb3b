"""A run directory's state: its summary's status, or, without a summary, whether its owner still lives
(`running`, `dead`: launchers/lifecycle/liveness.py); the attic where a retry moves what did not complete.
Nothing is ever written over: a directory that holds a run is refused before launch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.errors import ConfigError
from benchmarks.rundir import cell_identity, summary_schema
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


# run-directory states (benchmarks/rundir/) that a launch of the cell moves into <campaign>/attic/ and runs again
RETRY_STATES = (*sorted(summary_schema.RETRIED_STATES), "dead")


class CellCompleted(ConfigError):
    """The cell's run directory holds a completed run: never overwritten (run -m and campaign run skip it)."""


class HeldElsewhere(ConfigError):
    """The cell's run directory is held by a live run of another launch (launchers/lifecycle/liveness.py)."""


def next_free_repeat(cfg, *, world_size: int, num_nodes: int = 1) -> int:
    """The first run.repeat (from the configured one) whose run directory holds no run and no launch claimed."""
    repeat = int(cfg.run.repeat)
    while taken(repeat_dir(cfg, repeat=repeat, world_size=world_size, num_nodes=num_nodes)):
        repeat += 1
    return repeat


def repeat_dir(cfg, *, repeat: int, world_size: int, num_nodes: int) -> Path:
    """The run directory of this config's cell at run.repeat=`repeat` (run.dir aside)."""
    from benchmarks.validate import settings

    flat = {**cell_identity.flatten(settings(cfg)), "run.dir": None, "run.repeat": repeat}
    return cell_identity.run_dir(flat, world_size=world_size, num_nodes=num_nodes)


def repeat_is_fixed(overrides: list[str]) -> bool:
    """The user chose the run's directory: run.repeat=N or run.dir=PATH among the overrides."""
    return any(o.lstrip("+").startswith(("run.repeat=", "run.dir=")) for o in overrides)


def take_run_dir(
    cfg, run_dir: Path, *, world_size: int, num_nodes: int, next_if_held: bool, claim: bool
) -> tuple[Path, int]:
    """The run directory this launch gets and its repeat. A completed run there: CellCompleted. A live run
    there (another launch's): the next free repeat when next_if_held, else HeldElsewhere naming its owner. A
    failed, interrupted, hung or dead run there: moved into <campaign>/attic/ with its reason (when `claim`;
    a dry run only says what would run). claim: make this process the directory's owner (owner.json created
    exclusively: of two launches at once, one gets the directory and the other looks again)."""
    repeat = int(cfg.run.repeat)
    while True:
        found = state(run_dir)
        if found == "completed":
            free = next_free_repeat(cfg, world_size=world_size, num_nodes=num_nodes)
            raise CellCompleted(
                f"run directory {run_dir} already holds a completed run (never overwritten); pass "
                f"run.repeat={free} or another run.campaign"
            )
        if found == "running":
            held_by = life(run_dir)
            if not next_if_held:
                raise HeldElsewhere(
                    f"run directory {run_dir} is in use: {held_by.says()}; wait for it to end, or leave out "
                    "run.repeat and run.dir (a launch without them takes the next free repeat)"
                )
            held, repeat = run_dir, next_free_repeat(cfg, world_size=world_size, num_nodes=num_nodes)
            run_dir = repeat_dir(cfg, repeat=repeat, world_size=world_size, num_nodes=num_nodes)
            print(
                f"[ddlbench] {held.name} is running elsewhere ({held_by.says()}): this run takes run.repeat={repeat}",
                file=sys.stderr,
                flush=True,
            )
            continue
        if not claim:
            return run_dir, repeat
        if found in RETRY_STATES:
            attic = run_dir.parent / ATTIC
            if found == "dead":
                moved = reap(run_dir, attic, held_by := life(run_dir))
                if moved is None:
                    continue  # it changed meanwhile (another launch took it): look again
                found = f"dead ({held_by.says()})"
            else:
                moved = move_aside(run_dir, attic, reason=found)
            # kept for the post-mortem, out of the cell's place: the retry runs
            print(f"[ddlbench] {run_dir.name} was {found}: moved to {moved}", file=sys.stderr, flush=True)
        try:
            liveness.claim(run_dir)
        except liveness.Taken:
            continue  # another launch claimed it first: look again
        return run_dir, repeat
