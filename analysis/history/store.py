"""The history store: every completed run of any number of run roots, one row each, in one SQLite file.

Why SQLite: Python's standard library writes it (no new dependency), the `sqlite3` command reads it on any
cluster login node, pandas and DuckDB read it as they are, and one file takes upserts: a store is grown over
months by many `ddlbench history` calls, which Parquet files (written whole) do not take.

A run's identity (`run_key`) is its cell hash, its directory's name and its start time (meta.json's
`started`): the same run read again, through another root or a copy of its folder, is one row, updated in
place (an upsert), never a second one; nothing is ever deleted. Only completed runs are kept (summary.json
`status: completed` with a readable meta.json and rank logs): a run still running is indexed once it is done.

What a row holds (docs/history.md has the schema): the cell's figures as `results` computes them
(benchmarks/rundir/ `throughput` over the rank logs; MFU and J/sample from summary.json; the time shares of
analysis/time_shares.py over the measured steps; the spread of the slowest rank's step time), the run's marks
(analysis/caveats.py, whatever marks it yields for one run), its date, hosts and versions, and the settings that
are no part of the cell (NOT_IDENTITY of benchmarks/rundir/, and meta.json's environment).

Reading is lean, for months of runs: meta.json and summary.json, the `run:` and `system:` blocks of
config.yaml (the whole file only once per cell, for its scaling group), and the rank logs; a run already in
the store is recognised from meta.json alone and not read further.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmarks.errors import ConfigError

STORE_NAME = "history.sqlite"  # the default store: <first root>/history.sqlite
STORE_SCHEMA_VERSION = 1

# the cells: one row per cell_hash, what tables show of it
CELL_COLUMNS: dict[str, str] = {
    "cell_hash": "TEXT PRIMARY KEY",
    "framework": "TEXT",
    "loader": "TEXT",
    "model": "TEXT",
    "precision": "TEXT",
    "per_gpu_batch": "INTEGER",
    "world_size": "INTEGER",
    "num_nodes": "INTEGER",
    "device": "TEXT",  # cpu or cuda: what a rank is (analysis/device.py words)
    "sample_unit": "TEXT",  # images or sequences
    "series_hash": "TEXT",  # the cell across campaigns: its run key less run.campaign (history's series)
    "group_hash": "TEXT",  # the weak-scaling curve (benchmarks/rundir/ group_hash): efficiency's baseline
    "label": "TEXT",  # <framework>-<loader>-<model>-<precision>-g<W>-n<N>-b<B>
}

# the versions a run ran with: what an upgrade changes (meta.json); compared across a change point
VERSIONS = (
    "driver",
    "cuda",
    "nccl",
    "torch",
    "framework_version",
    "dali",
    "python",
    "kernel",
    "ddlbench_git",
    "image",
    "image_digest",
)
# the figures of one run (NaN where it has none: MFU and energy on CPUs)
FIGURES = (
    "throughput_img_s",
    "per_gpu_img_s",
    "efficiency",  # per GPU against the smallest size of the cell's scaling group in the same campaign
    "mfu",
    "energy_j_per_sample",
    "data_share",
    "compute_share",
    "allreduce_share",
    "allreduce_exposed_share",
    "other_share",
    "step_s_median",
    "step_s_p95",
    "step_s_cv",  # the spread: std / mean of the slowest rank's measured step time
)
RUN_COLUMNS: dict[str, str] = {
    "run_key": "TEXT PRIMARY KEY",  # cell_hash/run directory name/started
    "cell_hash": "TEXT NOT NULL",
    "campaign": "TEXT",
    "repeat": "INTEGER",
    "run_name": "TEXT NOT NULL",
    "run_dir": "TEXT",  # where it was last read
    "started": "TEXT NOT NULL",  # meta.json, ISO 8601
    "started_s": "REAL",  # the same, seconds since the epoch (sorts, plots)
    "hosts": "TEXT",  # the hosts its ranks ran on, sorted, comma-separated
    "num_hosts": "INTEGER",
    "gpu_model": "TEXT",
    "cpu_model": "TEXT",
    **{v: "TEXT" for v in VERSIONS},
    "settings": "TEXT",  # JSON: the settings that are no part of the cell, and the environment
    **{f: "REAL" for f in FIGURES},
    "measured_steps": "INTEGER",
    "marks": "TEXT",  # analysis/caveats.py's text for the run ('' for none)
    "indexed_at": "TEXT",
}


def default_store(roots: list[Path]) -> Path:
    """Where the store is when --store is not given: <first root>/history.sqlite."""
    return Path(roots[0]) / STORE_NAME


def run_key(cell_hash: str, run_name: str, started: str) -> str:
    """A run's identity in the store: the same run, read through any root, has the same key."""
    return f"{cell_hash}/{run_name}/{started}"


@dataclass(slots=True)
class IndexStats:
    """What one indexing pass did."""

    num_seen: int = 0  # run directories found below the roots
    num_added: int = 0  # completed runs new to the store
    num_updated: int = 0  # completed runs already there, read again (--refresh)
    num_known: int = 0  # completed runs already there, not read again
    num_skipped: int = 0  # not completed (running, failed, ...) or unreadable
    skipped: dict[str, int] = field(default_factory=dict)  # why, how many
    seconds: float = 0.0

    def skip(self, why: str) -> None:
        self.num_skipped += 1
        self.skipped[why] = self.skipped.get(why, 0) + 1


# --- the store -----------------------------------------------------------------------------------


def connect(path: Path) -> sqlite3.Connection:
    """Open (or create) a store; its tables are created when missing, and a store of another schema version
    is refused with the fix."""
    path = Path(path)
    if path.exists() and path.is_dir():
        raise ConfigError(f"--store {path} is a directory; pass a file, e.g. --store {path / STORE_NAME}")
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=WAL")  # readers (a page, the sqlite3 CLI) while a pass writes
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as error:
        db.close()
        raise ConfigError(
            f"--store {path} is no SQLite file ({error}); pass a new path, e.g. --store history.sqlite"
        ) from None
    if tables and version != STORE_SCHEMA_VERSION:
        db.close()
        raise ConfigError(
            f"--store {path} has schema version {version}, this ddlbench writes {STORE_SCHEMA_VERSION}; "
            "pass a new --store (the old file is kept as it is)"
        )
    db.execute(f"CREATE TABLE IF NOT EXISTS cells ({', '.join(f'{c} {t}' for c, t in CELL_COLUMNS.items())})")
    db.execute(f"CREATE TABLE IF NOT EXISTS runs ({', '.join(f'{c} {t}' for c, t in RUN_COLUMNS.items())})")
    db.execute("CREATE INDEX IF NOT EXISTS runs_cell ON runs (cell_hash, campaign)")
    db.execute(
        "CREATE VIEW IF NOT EXISTS history AS SELECT cells.label, cells.framework, cells.loader, cells.model, "
        "cells.precision, cells.per_gpu_batch, cells.world_size, cells.num_nodes, cells.device, cells.sample_unit, "
        "cells.group_hash, cells.series_hash, runs.* FROM runs JOIN cells USING (cell_hash)"
    )
    db.execute(f"PRAGMA user_version={STORE_SCHEMA_VERSION}")
    db.commit()
    return db


def known_keys(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT run_key FROM runs")}


def upsert(db: sqlite3.Connection, rows: list[dict], cells: list[dict]) -> None:
    """Write runs and cells, replacing a row of the same key in place (the same run read again)."""
    for table, columns, key, items in (
        ("cells", CELL_COLUMNS, "cell_hash", cells),
        ("runs", RUN_COLUMNS, "run_key", rows),
    ):
        if not items:
            continue
        names = list(columns)
        updates = ", ".join(f"{c}=excluded.{c}" for c in names if c != key)
        db.executemany(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
            f"ON CONFLICT({key}) DO UPDATE SET {updates}",
            [tuple(item.get(c) for c in names) for item in items],
        )


def update_efficiency(db: sqlite3.Connection) -> None:
    """Each run's weak-scaling efficiency: its per-GPU throughput over the mean per-GPU throughput of the
    runs of its scaling group (cells.group_hash) at the group's smallest size in the same campaign."""
    db.execute("DROP TABLE IF EXISTS temp.baseline")
    db.execute(
        "CREATE TEMP TABLE baseline AS "
        "WITH sized AS (SELECT r.campaign, c.group_hash, c.world_size, r.per_gpu_img_s FROM runs r "
        "JOIN cells c USING (cell_hash)), "
        "smallest AS (SELECT campaign, group_hash, MIN(world_size) AS world_size FROM sized "
        "GROUP BY campaign, group_hash) "
        "SELECT s.campaign, s.group_hash, AVG(s.per_gpu_img_s) AS per_gpu_img_s FROM sized s "
        "JOIN smallest m ON s.campaign IS m.campaign AND s.group_hash = m.group_hash AND s.world_size = m.world_size "
        "GROUP BY s.campaign, s.group_hash"
    )
    db.execute(
        "UPDATE runs SET efficiency = per_gpu_img_s / (SELECT b.per_gpu_img_s FROM baseline b JOIN cells c "
        "ON b.group_hash = c.group_hash WHERE c.cell_hash = runs.cell_hash AND b.campaign IS runs.campaign)"
    )
    db.execute("DROP TABLE temp.baseline")


def read_store(path: Path) -> pd.DataFrame:
    """Every run of a store with its cell's columns (the `history` view), oldest first."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--store {path} does not exist; index runs first: ddlbench history ROOT --store {path}")
    db = connect(path)
    try:
        frame = pd.read_sql_query("SELECT * FROM history ORDER BY started_s, run_key", db)
    finally:
        db.close()
    for column in FIGURES:
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype("float64")
    return frame
