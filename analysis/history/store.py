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

import functools
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.errors import ConfigError
from benchmarks.rundir import cell_identity, run_files, summary_schema

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
CAMPAIGN_KEY = "run.campaign"  # a setting of the run key; history follows a cell across campaigns without it
# the settings of NOT_IDENTITY that only say where and which run it is: no difference worth naming
BOOKKEEPING = ("run.repeat", "run.dir", "run.root", "run.campaign", "campaign", "experiment", "hydra")
# the top-level blocks of config.yaml that hold every NOT_IDENTITY setting a run writes
_BLOCKS = re.compile(r"^(?:run|system):.*\n(?:[ \t].*\n|[ \t]*\n)*", re.M)
# run.dir, run.root, run.campaign, run.repeat: left out before parsing, so that repeats parse one text once
_RUN_PLACE = re.compile(r"^  (?:dir|root|campaign|repeat):.*\n", re.M)


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


# --- one run directory -> a row ------------------------------------------------------------------


def _number(value: Any) -> float | None:
    """A finite number as float; None for anything else (a bool, text, NaN)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _epoch_s(started: str) -> float | None:
    try:
        return datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").timestamp()
    except ValueError:
        try:
            return datetime.fromisoformat(started).timestamp()
        except ValueError:
            return None


def _flat(tree: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _yaml(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _settings(config_text: str, meta: dict) -> dict[str, Any]:
    """The run's settings that are no part of its cell (NOT_IDENTITY, less BOOKKEEPING), and meta.json's
    environment as env.<NAME>: what may differ between repeats of one cell."""
    blocks = "".join(m.group(0) for m in _BLOCKS.finditer(config_text))
    kept = dict(_outside_cell(_RUN_PLACE.sub("", blocks)))
    env = meta.get("env")
    if isinstance(env, dict):
        kept.update({f"env.{k}": v for k, v in env.items() if isinstance(v, str)})
    return {k: v for k, v in sorted(kept.items()) if v not in (None, [], {}, "")}


@functools.lru_cache(maxsize=256)
def _outside_cell(blocks: str) -> tuple[tuple[str, Any], ...]:
    """The settings of config.yaml's run: and system: blocks that are no part of the cell (one parse per
    distinct text: the repeats of a cell share it)."""
    try:
        tree = _yaml(blocks) or {}
    except Exception:  # noqa: BLE001 - a config.yaml no run wrote: its settings are unknown, not fatal
        tree = {}
    flat = _flat(tree) if isinstance(tree, dict) else {}
    return tuple(
        (k, tuple(v) if isinstance(v, list) else v)
        for k, v in flat.items()
        if not cell_identity.is_identity_key(k) and not any(k == b or k.startswith(f"{b}.") for b in BOOKKEEPING)
    )


def _versions(meta: dict) -> dict[str, str | None]:
    """What an upgrade changes, from meta.json: the driver, CUDA, NCCL, torch, the framework's library, DALI,
    Python, the kernel, ddlbench's commit and the image."""
    hardware = meta.get("hardware") if isinstance(meta.get("hardware"), dict) else {}
    packages = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    framework = meta.get("framework") if isinstance(meta.get("framework"), dict) else {}
    container = meta.get("container") if isinstance(meta.get("container"), dict) else {}
    name = framework.get("framework")
    library = {"horovod": "horovod", "deepspeed": "deepspeed"}.get(name, "torch")
    dali = next((packages[k] for k in sorted(packages) if k.startswith("nvidia-dali") and packages[k]), None)
    sha = _text(meta.get("git_sha"))
    kernel = _text(hardware.get("platform"))
    return {
        "driver": _text(hardware.get("driver")),
        "cuda": _text(hardware.get("cuda")),
        "nccl": _text(hardware.get("nccl")) or _text(framework.get("nccl")),
        "torch": _text(packages.get("torch")),
        "framework_version": f"{name} {packages.get(library)}" if name and packages.get(library) else _text(name),
        "dali": _text(dali),
        "python": _text(hardware.get("python")),
        "kernel": kernel,
        "ddlbench_git": (sha[:12] + ("+dirty" if meta.get("git_dirty") else "")) if sha else None,
        "image": _text(container.get("image")),
        "image_digest": _text(container.get("digest")),
    }


@dataclass(slots=True)
class Steps:
    """What the rank logs of one run give the store."""

    records: dict[int, list[dict]]
    hosts: list[str]


def _rank_logs(run_dir: Path, processes: int) -> Steps | str:
    """The measured step records of rank 0..processes-1 (lines a run did not write skipped), and the hosts of
    their headers; why not, when a rank has no log or no measured step."""
    records: dict[int, list[dict]] = {}
    hosts: set[str] = set()
    for rank in range(processes):
        try:
            data = (run_dir / f"rank{rank}.jsonl").read_bytes()
        except OSError:
            return f"no readable rank{rank}.jsonl"
        lines = data.splitlines()
        try:  # one parse for the whole file; line by line only where some line is broken
            parsed = json.loads(b"[" + b",".join(line for line in lines if line.strip()) + b"]")
        except ValueError:
            parsed = []
            for line in lines:
                try:
                    parsed.append(json.loads(line))
                except ValueError:
                    continue
        kept = []
        for record in parsed:
            if not isinstance(record, dict):
                continue
            if record.get("kind") == "header":
                if _text(record.get("host")):
                    hosts.add(record["host"])
            elif (
                type(record.get("step")) is int
                and type(record.get("samples")) is int
                and _number(record.get("step_s")) is not None
                and summary_schema.is_measured(record)
            ):
                kept.append(record)
        if not kept:
            return f"rank{rank}.jsonl holds no measured step"
        records[rank] = kept
    return Steps(records, sorted(hosts))


def _step_figures(steps: Steps, world_size: int) -> dict[str, float | None]:
    """THE throughput (benchmarks/rundir/), the time shares (as analysis/time_shares.py breakdown: summed
    over ranks and steps) and the spread of the slowest rank's step time."""
    figures: dict[str, Any] = dict(summary_schema.throughput(steps.records, world_size=world_size))
    phases = ("data_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "comm_exposed_s", "step_s")
    sums = dict.fromkeys(phases, 0.0)
    timed: set[str] = set()
    slowest: dict[int, float] = {}
    for records in steps.records.values():
        for record in records:
            for phase in phases:
                value = record.get(phase)
                if type(value) is float or type(value) is int:
                    sums[phase] += value
                    timed.add(phase)
            step_s = float(record["step_s"])
            if step_s > slowest.get(record["step"], -1.0):
                slowest[record["step"]] = step_s
    step = sums["step_s"]
    if step > 0 and math.isfinite(step):
        exposed = sums["comm_exposed_s"]
        compute = sums["fwd_s"] + sums["bwd_s"] + sums["opt_s"] - exposed
        figures.update(
            data_share=sums["data_s"] / step,
            compute_share=compute / step,
            allreduce_share=sums["comm_s"] / step if "comm_s" in timed else None,
            allreduce_exposed_share=exposed / step if "comm_exposed_s" in timed else None,
            other_share=(step - sums["data_s"] - compute - exposed) / step,
        )
    times = sorted(slowest.values())
    if times:
        n, mean = len(times), sum(times) / len(times)
        figures.update(step_s_median=_quantile(times, 0.5), step_s_p95=_quantile(times, 0.95))
        if n > 1 and mean > 0:
            figures["step_s_cv"] = math.sqrt(sum((t - mean) ** 2 for t in times) / (n - 1)) / mean
    return {
        k: (v if v is None or (isinstance(v, float | int) and math.isfinite(v)) else None) for k, v in figures.items()
    }


def _quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly (pandas' and numpy's default)."""
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@dataclass(slots=True)
class RunHead:
    """What meta.json and summary.json say of a run: enough to know it and whether it counts."""

    run_dir: Path
    key: str
    meta: dict
    summary: dict


def read_head(run_dir: Path) -> RunHead | str:
    """A completed run's identity; why it is not one to keep (a one-line reason) otherwise."""
    try:
        summary = json.loads((run_dir / run_files.SUMMARY).read_bytes())
    except FileNotFoundError:
        return "no summary.json (running, or died)"
    except (OSError, ValueError):
        return "unreadable summary.json"
    if not isinstance(summary, dict) or summary.get("status") != "completed":
        status = summary.get("status") if isinstance(summary, dict) else None
        return f"status {status}" if isinstance(status, str) else "summary.json without a status"
    try:
        meta = json.loads((run_dir / run_files.META).read_bytes())
    except (OSError, ValueError):
        return "no readable meta.json"
    if not isinstance(meta, dict):
        return "no readable meta.json"
    started, world, nodes = _text(meta.get("started")), meta.get("world_size"), meta.get("num_nodes")
    if started is None or type(world) is not int or type(nodes) is not int or world < 1:
        return "meta.json lacks started, world_size or num_nodes"
    cell = _text(meta.get("cell_hash")) or _hash_of_config(run_dir, world, nodes)
    if cell is None:
        return "no cell_hash in meta.json and no readable config.yaml to compute it"
    meta["cell_hash"] = cell
    return RunHead(run_dir, run_key(cell, run_dir.name, started), meta, summary)


def _hash_of_config(run_dir: Path, world_size: int, num_nodes: int) -> str | None:
    """The cell hash of a run whose meta.json predates the field: from its config.yaml, as rundir hashes it."""
    try:
        cfg = _yaml((run_dir / run_files.CONFIG).read_text(errors="replace"))
        return (
            cell_identity.cell_hash(cfg, world_size=world_size, num_nodes=num_nodes) if isinstance(cfg, dict) else None
        )
    except Exception:  # noqa: BLE001 - unreadable or no run's config: the run cannot be placed
        return None


def read_row(head: RunHead, indexed_at: str) -> tuple[dict, dict[str, Any]] | str:
    """A completed run's row of the store (without its marks and efficiency: the pass adds them) and its
    config.yaml text; why not, where its rank logs do not hold it."""
    meta, summary, run_dir = head.meta, head.summary, head.run_dir
    world = meta["world_size"]
    processes = meta.get("num_processes") if type(meta.get("num_processes")) is int else world
    steps = _rank_logs(run_dir, max(1, min(processes, world)))
    if isinstance(steps, str):
        return steps
    try:
        config_text = (run_dir / run_files.CONFIG).read_text(errors="replace")
    except OSError:
        config_text = ""
    hardware = meta.get("hardware") if isinstance(meta.get("hardware"), dict) else {}
    gpus = hardware.get("gpus") if isinstance(hardware.get("gpus"), list) else []
    hosts = steps.hosts or ([hardware["host"]] if _text(hardware.get("host")) else [])
    row: dict[str, Any] = {
        "run_key": head.key,
        "cell_hash": meta["cell_hash"],
        "campaign": _text(summary.get("campaign")) or run_dir.parent.name,
        "repeat": summary.get("repeat") if type(summary.get("repeat")) is int else None,
        "run_name": run_dir.name,
        "run_dir": str(run_dir.resolve()),
        "started": meta["started"],
        "started_s": _epoch_s(meta["started"]),
        "hosts": ",".join(hosts),
        "num_hosts": len(hosts),
        "gpu_model": ", ".join(sorted({str(g) for g in gpus})) or None,
        "cpu_model": _text(hardware.get("cpu_model")),
        **_versions(meta),
        "settings": json.dumps(_settings(config_text, meta), sort_keys=True, default=str),
        **_step_figures(steps, world),
        "mfu": _number(summary.get("mfu")),
        "energy_j_per_sample": _number(summary.get("energy_j_per_sample")),
        "marks": "",
        "indexed_at": indexed_at,
    }
    return row, {"config_text": config_text}


def _cell_row(head: RunHead, config_text: str) -> dict:
    """A cell's row, from its first run read in a pass (the whole config.yaml, for the scaling group)."""
    meta, summary = head.meta, head.summary
    try:
        cfg = _yaml(config_text)
        group = cell_identity.group_hash(cfg, world_size=meta["world_size"]) if isinstance(cfg, dict) else None
        key = cell_identity.identity(cfg, world_size=meta["world_size"], num_nodes=meta["num_nodes"]) if group else {}
        key.pop(CAMPAIGN_KEY, None)  # run.campaign is in the run key: the same cell in two campaigns is two cells
        series = cell_identity.key_hash(key) if key else meta["cell_hash"]
    except Exception:  # noqa: BLE001 - no readable config: no scaling group (no efficiency), a series of its own
        cfg, group, series = None, None, meta["cell_hash"]
    system = cfg.get("system") if isinstance(cfg, dict) and isinstance(cfg.get("system"), dict) else {}
    names = {k: _text(summary.get(k)) for k in ("framework", "loader", "model", "precision")}
    batch = summary.get("per_gpu_batch") if type(summary.get("per_gpu_batch")) is int else None
    label = "-".join(
        [*(names[k] or "?" for k in names), f"g{meta['world_size']}", f"n{meta['num_nodes']}", f"b{batch}"]
    )
    return {
        "cell_hash": meta["cell_hash"],
        **names,
        "per_gpu_batch": batch,
        "world_size": meta["world_size"],
        "num_nodes": meta["num_nodes"],
        "device": _text(system.get("device")) or ("cuda" if (meta.get("hardware") or {}).get("gpus") else "cpu"),
        "sample_unit": _text(summary.get("sample_unit")) or "images",
        "series_hash": series,
        "group_hash": group,
        "label": label,
    }


def _run_marks(heads: list[RunHead], rows: list[dict]) -> list[str]:
    """Each run's marks text from analysis/caveats.py (one run is its own key: marks of a single run), over
    the runs-table columns that module reads (meta.* and the summary's fields, config.system.*)."""
    from analysis.caveats import cell_marks, run_marks
    from analysis.load.values import flatten

    table = []
    for head, row in zip(heads, rows):
        flat: dict[str, Any] = {"run_id": row["run_key"]}
        flatten({k: v for k, v in head.meta.items() if k not in ("env", "argv")}, "meta.", flat)
        flat.update({k: v for k, v in head.summary.items() if not isinstance(v, dict | list)})
        flat["oversubscribed"] = (
            head.meta.get("oversubscribed") if type(head.meta.get("oversubscribed")) is bool else None
        )
        for key, value in json.loads(row["settings"]).items():
            flat[f"config.{key}"] = value
        table.append(flat)
    frame = pd.DataFrame(table)
    # runs with the same facts (run_marks' columns) have the same marks: one text per distinct set of facts
    facts = run_marks(frame).drop(columns="run_id").astype(str)
    first = ~facts.duplicated()
    texts = cell_marks(frame[first.to_numpy()], by="run_id")
    per_facts = {
        tuple(row): str(texts.get(key, "") or "")
        for row, key in zip(facts[first].itertuples(index=False, name=None), frame.loc[first.to_numpy(), "run_id"])
    }
    return [per_facts[tuple(row)] for row in facts.itertuples(index=False, name=None)]


# --- a pass ----------------------------------------------------------------------------------------


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
            _CELLS[row["cell_hash"]] = _cell_row(head, extra["config_text"])
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
            for row, marks in zip(rows, _run_marks(heads, rows)):
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
