"""A pass of `ddlbench history`: every run directory below the roots read (in worker processes from
PARALLEL_FROM runs on) and upserted into the store, each run once however often the roots are read or overlap."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from analysis.history.run_row import RunHead, cell_row, read_head, read_row, run_marks_of
from analysis.history.store import IndexStats, connect, known_keys, update_efficiency, upsert
from benchmarks.errors import ConfigError
from benchmarks.rundir import run_files


def run_dirs(roots: Iterable[Path]) -> Iterator[Path]:
    """Every directory below the roots that holds a summary.json (a run that ended), each once, in order;
    runs moved to a campaign's attic/ (retried) are left out."""
    seen: set[Path] = set()
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "attic")
            if run_files.SUMMARY in filenames:
                real = Path(dirpath).resolve()
                if real not in seen:
                    seen.add(real)
                    yield Path(dirpath)


PARALLEL_FROM = 400  # run directories from which a pass reads them in worker processes (fork), one per CPU


@dataclass(slots=True)
class _Read:
    """One run directory as a worker read it: known already, its row, or why it is skipped."""

    state: str  # known | read | skipped
    why: str = ""
    head: RunHead | None = None
    row: dict | None = None
    cell: dict | None = None


def _read_one(
    run_dir: Path, known: frozenset[str], cells_known: frozenset[str], refresh: bool, indexed_at: str
) -> _Read:
    head = read_head(run_dir)
    if isinstance(head, str):
        return _Read("skipped", head)
    if head.key in known and not refresh:
        return _Read("known", head=None)
    result = read_row(head, indexed_at)
    if isinstance(result, str):
        return _Read("skipped", result)
    row, extra = result
    cell = None
    if refresh or row["cell_hash"] not in cells_known:
        if row["cell_hash"] not in _CELLS:  # the whole config.yaml once per cell and process
            _CELLS[row["cell_hash"]] = cell_row(head, extra["config_text"])
        cell = _CELLS[row["cell_hash"]]
    return _Read("read", head=head, row=row, cell=cell)


_CELLS: dict[str, dict] = {}  # cell_hash -> its row, read once per process
_TASK: tuple = ()  # the pass's arguments, inherited by forked workers


def _read_chunk(chunk: list[Path]) -> list[_Read]:
    return [_read_one(d, *_TASK) for d in chunk]


def _reads(dirs: list[Path], task: tuple, jobs: int) -> Iterator[_Read]:
    """Each run directory read, in order: in `jobs` forked workers when there are many."""
    import multiprocessing

    global _TASK
    if jobs < 2 or len(dirs) < PARALLEL_FROM or "fork" not in multiprocessing.get_all_start_methods():
        yield from (_read_one(d, *task) for d in dirs)
        return
    _TASK = task
    chunks = [dirs[i : i + 200] for i in range(0, len(dirs), 200)]
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for reads in pool.imap(_read_chunk, chunks):
                yield from reads
    finally:
        _TASK = ()


def index_roots(
    roots: list[Path],
    store: Path,
    *,
    refresh: bool = False,
    progress: Callable[[IndexStats], None] | None = None,
    every: int = 1000,
    jobs: int | None = None,
) -> IndexStats:
    """Add every completed run below the roots to the store (created when new); a run already there is
    left as it is, or read again and replaced in place with `refresh`. `progress` is called every `every`
    runs and at the end; `jobs`: worker processes (default: one per CPU)."""
    missing = [str(r) for r in roots if not Path(r).is_dir()]
    if missing:
        raise ConfigError(
            f"ROOT {missing[0]} is not a directory; pass folders runs were written to (run.root), e.g. "
            "ddlbench history runs/ /shared/site-b/runs"
        )
    stats = IndexStats()
    start = time.perf_counter()
    _CELLS.clear()
    indexed_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    db = connect(store)
    try:
        known = known_keys(db)
        cells_known = {r[0] for r in db.execute("SELECT cell_hash FROM cells WHERE group_hash IS NOT NULL")}
        dirs = list(run_dirs(roots))
        task = (frozenset(known), frozenset(cells_known), refresh, indexed_at)
        heads: list[RunHead] = []
        rows: list[dict] = []
        cells: dict[str, dict] = {}
        for read in _reads(dirs, task, jobs if jobs is not None else (os.cpu_count() or 1)):
            stats.num_seen += 1
            if read.state == "skipped":
                stats.skip(read.why)
            elif read.state == "known":
                stats.num_known += 1
            elif read.head is not None and read.row is not None:
                if read.head.key in known and not refresh:  # a copy of a run read earlier in this pass
                    stats.num_known += 1
                    continue
                if read.head.key in task[0]:
                    stats.num_updated += 1
                else:
                    stats.num_added += 1
                known.add(read.head.key)
                heads.append(read.head)
                rows.append(read.row)
                if read.cell is not None:
                    cells.setdefault(read.row["cell_hash"], read.cell)
            if progress and stats.num_seen % every == 0:
                stats.seconds = time.perf_counter() - start
                progress(stats)
        if rows:
            for row, marks in zip(rows, run_marks_of(heads, rows)):
                row["marks"] = marks
        # one transaction: a pass that fails leaves the store as it was
        with db:
            upsert(db, rows, list(cells.values()))
            if rows:
                update_efficiency(db)
    finally:
        db.close()
    stats.seconds = time.perf_counter() - start
    if progress:
        progress(stats)
    return stats
