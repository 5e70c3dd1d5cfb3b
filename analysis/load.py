"""Run directories (any depth below a root) -> tidy pandas DataFrames.

Tables (column names follow ARCHITECTURE.md):
- runs: one row per run directory: `run_id` (path below the root), `status`, `reason`, the
  summary's fields, the resolved config flattened as `config.<key>` and provenance as `meta.<key>`;
- steps: one row per rank per logged step of every *completed* run (rank<R>.jsonl);
- telemetry: one row per sample of telemetry*.jsonl (whatever keys are there, flattened);
- commbench: one row per measurement of commbench*.json (op, size_bytes, algbw_gb_s, ...);
- problems: every line or file that was skipped, and why.

Only `status == "completed"` runs are counted; everything else stays in `runs` with its reason.
A corrupt or truncated line is skipped with a LogWarning and listed in `problems`.
"""
from __future__ import annotations

import io
import json
import os
import re
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks import rundir

try:  # the fast path: Arrow's multi-threaded JSON-lines reader (pure Python fallback below)
    import pyarrow as pa
    import pyarrow.json as pa_json
except ImportError:  # pragma: no cover - exercised by monkeypatching _HAVE_ARROW
    pa = pa_json = None

SUMMARY, META, CONFIG = rundir.SUMMARY, rundir.META, rundir.CONFIG
SUPPORTED_SCHEMA_VERSIONS = frozenset({1})
RANK_LOG = re.compile(r"rank(\d+)\.jsonl$")
TELEMETRY = re.compile(r"telemetry.*\.jsonl$")
COMMBENCH = re.compile(r"commbench.*\.json$")

# the per-step record written by benchmarks/loop.py (schema_version 1)
STEP_FIELDS, REQUIRED_STEP_FIELDS = rundir.STEP_FIELDS, rundir.REQUIRED_STEP_FIELDS
COMMBENCH_FIELDS = ["op", "size_bytes", "algbw_gb_s", "busbw_gb_s", "time_s", "world_size", "backend"]
# meta.json keys too bulky or too free-form for a table column (kept in the file)
META_SKIP = {"argv", "env", "framework", "loader", "hardware.nvidia_smi_topo"}

_HAVE_ARROW = pa is not None


class LogWarning(UserWarning):
    """A log line or file was skipped (corrupt, truncated, unknown schema)."""


@dataclass(slots=True)
class Campaign:
    """Every table of one runs directory."""

    root: Path
    runs: pd.DataFrame
    steps: pd.DataFrame
    telemetry: pd.DataFrame
    commbench: pd.DataFrame
    problems: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def counted(self) -> pd.DataFrame:
        """The runs that count: completed ones."""
        return self.runs[self.runs["status"] == "completed"]

    @property
    def excluded(self) -> pd.DataFrame:
        """The runs that do not count, with their reason."""
        return self.runs[self.runs["status"] != "completed"]


class _Problems:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, run_id: str, path: Path | str, line: int | None, problem: str, *, warn: bool = True) -> None:
        self.rows.append({"run_id": run_id, "file": str(path), "line": line, "problem": problem})
        if warn:
            where = f"{path}:{line}" if line else str(path)
            warnings.warn(f"{where}: {problem}", LogWarning, stacklevel=3)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["run_id", "file", "line", "problem"])


def find_run_dirs(root: Path) -> list[Path]:
    """Every directory below root (root included) that looks like a run: meta.json, summary.json or a rank log."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if META in filenames or SUMMARY in filenames or any(RANK_LOG.match(f) for f in filenames):
            found.append(Path(dirpath))
    return sorted(found)


def _flatten(obj: Any, prefix: str, out: dict, skip: set[str] = frozenset()) -> dict:
    """Nested dicts -> dotted keys; lists become JSON text so every cell is a scalar (Parquet-safe)."""
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if name.split(".", 1)[-1] in skip:
            continue
        if isinstance(value, dict):
            _flatten(value, f"{name}.", out, skip)
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, default=str)
        else:
            out[name] = value
    return out


def _read_json(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(path.read_text()), None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"unreadable {path.name}: {error}"


def _read_config(path: Path) -> dict | None:
    """config.yaml as a dict, or None when it is missing or unreadable."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        cfg = yaml.load(path.read_text(), Loader=loader)
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return None
    return cfg if isinstance(cfg, dict) else None


def _identify(row: dict, cfg: dict | None) -> bool:
    """The run's cell (rundir's run key: every setting + its size) and its weak and strong scaling
    curves, from config.yaml and meta.json's world size and node count; False when they are unknown."""
    world, nodes = row.get("meta.world_size"), row.get("meta.num_nodes")
    if cfg is None or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (world, nodes)):
        return False
    try:
        row.update(cell_hash=rundir.cell_hash(cfg, world_size=world, num_nodes=nodes),
                   group_hash=rundir.group_hash(cfg, world_size=world, mode="weak"),
                   strong_group_hash=rundir.group_hash(cfg, world_size=world, mode="strong"),
                   world_size=world, num_nodes=nodes)
    except (TypeError, ValueError, KeyError):  # settings no run writes (a list of mappings, ...)
        return False
    return True


def _schema_problem(version: Any, where: str) -> str | None:
    if version in SUPPORTED_SCHEMA_VERSIONS:
        return None
    allowed = ", ".join(map(str, sorted(SUPPORTED_SCHEMA_VERSIONS)))
    return (f"schema_version {version!r} in {where} is not supported (this ddlbench reads {allowed}); "
            f"analyse it with the ddlbench version that wrote it")


def _run_row(run_dir: Path, root: Path, problems: _Problems) -> tuple[dict, dict[int, Path]]:
    run_id = run_dir.relative_to(root).as_posix() if run_dir != root else run_dir.name
    row: dict[str, Any] = {"run_id": run_id, "run_dir": str(run_dir), "cell": run_dir.name,
                           "status": None, "reason": None}
    names = os.listdir(run_dir)
    rank_files = {int(m.group(1)): run_dir / n for n in names if (m := RANK_LOG.match(n))}
    cfg = _read_config(run_dir / CONFIG) if CONFIG in names else None
    if cfg is not None:
        _flatten(cfg, "config.", row)
    if META in names:
        meta, error = _read_json(run_dir / META)
        if isinstance(meta, dict):
            row["meta.schema_version"] = meta.get("schema_version")
            _flatten({k: v for k, v in meta.items() if k != "schema_version"}, "meta.", row, META_SKIP)
            if (problem := _schema_problem(meta.get("schema_version"), META)) is not None:
                row.update(status="unsupported", reason=problem)
        elif error:
            problems.add(run_id, run_dir / META, None, error)
    # identify the cell even when there is no summary (from the config)
    for key, cfg_key in (("framework", "config.framework.name"), ("loader", "config.loader.name"),
                         ("precision", "config.precision.name"), ("per_gpu_batch", "config.run.per_gpu_batch"),
                         ("campaign", "config.run.campaign"), ("repeat", "config.run.repeat"), ("cache", "config.data.cache"),
                         ("world_size", "meta.world_size"), ("num_nodes", "meta.num_nodes")):
        if cfg_key in row:
            row[key] = row[cfg_key]
    if SUMMARY not in names:
        if row["status"] is None:
            row.update(status="incomplete", reason="no summary.json (the run died or is still running)")
        return row, rank_files
    summary, error = _read_json(run_dir / SUMMARY)
    if not isinstance(summary, dict):
        problems.add(run_id, run_dir / SUMMARY, None, error or "summary.json is not an object")
        row.update(status="corrupt", reason=error or "summary.json is not an object")
        return row, rank_files
    if row["status"] is not None:  # unsupported meta.json wins
        return row, rank_files
    row.update({k: v for k, v in summary.items() if not isinstance(v, (dict, list))})
    if (problem := _schema_problem(summary.get("schema_version"), SUMMARY)) is not None:
        row.update(status="unsupported", reason=problem)
    elif summary.get("status") in ("failed", "interrupted"):
        row["reason"] = f"{summary['status']}: {summary.get('error', 'no error recorded')}"
    elif summary.get("status") != "completed":
        row.update(status="corrupt", reason=f"summary.json status {summary.get('status')!r} is not one a run writes "
                                            "(completed, failed, interrupted)")
    elif not _identify(row, cfg):
        row.update(status="corrupt", reason="no readable config.yaml or world size in meta.json: the run's settings "
                                            "are unknown, so it belongs to no cell")
    elif not rank_files:
        row.update(status="incomplete", reason="summary.json says completed but there is no rank<R>.jsonl")
    elif isinstance(ws := summary.get("world_size"), int) and len(rank_files) != ws:
        row.update(status="incomplete", reason=f"rank logs for {len(rank_files)} of world_size {ws} ranks")
    return row, rank_files


# --- rank logs ---------------------------------------------------------------------------------

def _parse_lines_python(body: bytes, first_line: int, run_id: str, path: Path, problems: _Problems) -> list[dict]:
    records = []
    bad: list[str] = []
    for number, line in enumerate(body.split(b"\n"), start=first_line):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            truncated = not body.endswith(b"\n") and number == first_line + body.count(b"\n")
            reason = "truncated last line" if truncated else f"corrupt line ({error.msg})"
            problems.add(run_id, path, number, f"{reason}; skipped", warn=False)
            bad.append(f"line {number}: {reason}")
            continue
        missing = [f for f in REQUIRED_STEP_FIELDS if not isinstance(record, dict) or record.get(f) is None]
        if missing:
            problems.add(run_id, path, number, f"step record without {', '.join(missing)}; skipped", warn=False)
            bad.append(f"line {number}: no {', '.join(missing)}")
            continue
        records.append(record)
    if bad:
        warnings.warn(f"{path}: skipped {len(bad)} unreadable line(s): {'; '.join(bad[:3])}", LogWarning, stacklevel=4)
    return records


if _HAVE_ARROW:
    _ARROW_TYPES = {"int64": pa.int64(), "bool": pa.bool_(), "float64": pa.float64()}
    _STEP_SCHEMA = pa.schema([(k, _ARROW_TYPES[v]) for k, v in STEP_FIELDS.items()])
    _PARSE = pa_json.ParseOptions(explicit_schema=_STEP_SCHEMA, unexpected_field_behavior="infer")
    _READ = pa_json.ReadOptions(use_threads=False, block_size=1 << 24)


def _records_to_arrow(records: list[dict]):
    table = pa.Table.from_pylist(records)
    for name, kind in STEP_FIELDS.items():
        target = _ARROW_TYPES[kind]
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(len(table), target))
        elif table.schema.field(name).type != target:
            table = table.set_column(table.column_names.index(name), name, table[name].cast(target))
    return table


def _split_header(data: bytes, run_id: str, path: Path, problems: _Problems) -> tuple[dict | None, bytes]:
    newline = data.find(b"\n")
    head, body = (data, b"") if newline < 0 else (data[:newline], data[newline + 1:])
    try:
        header = json.loads(head)
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("kind") != "header":
        problems.add(run_id, path, 1, "no header line (kind=header, schema_version)")
        return None, body
    return header, body


def _parse_body(body: bytes, run_id: str, path: Path, problems: _Problems):
    """Step lines -> an Arrow table (or a list of dicts without pyarrow); None when there is no step."""
    if not body.strip():
        return None
    if _HAVE_ARROW:
        try:
            table = pa_json.read_json(io.BytesIO(body), read_options=_READ, parse_options=_PARSE)
            if not any(table[f].null_count for f in REQUIRED_STEP_FIELDS):
                return table
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass  # a corrupt or truncated line somewhere: the line-by-line path finds and names it
        records = _parse_lines_python(body, 2, run_id, path, problems)
        return _records_to_arrow(records) if records else None
    return _parse_lines_python(body, 2, run_id, path, problems) or None


def _with_rank(steps, rank: int):
    if _HAVE_ARROW:
        return steps.append_column("rank", pa.repeat(pa.scalar(rank, pa.int32()), len(steps)))
    return [{**r, "rank": rank} for r in steps]


def _read_run_logs(run_id: str, rank_files: dict[int, Path], problems: _Problems) -> tuple[dict | None, list]:
    """All rank logs of one run -> (status update or None, step tables with a rank column).

    Fast path: the ranks' step lines are parsed as one buffer (one Arrow call per run, which releases
    the GIL, so runs parse in parallel threads); any failure falls back to per-file parsing, which
    names the bad lines."""
    bodies: list[tuple[int, Path, bytes]] = []
    for rank, path in sorted(rank_files.items()):
        header, body = _split_header(path.read_bytes(), run_id, path, problems)
        if header is None:
            return {"status": "corrupt", "reason": f"{path.name} has no header line"}, []
        if (problem := _schema_problem(header.get("schema_version"), path.name)) is not None:
            return {"status": "unsupported", "reason": problem}, []
        bodies.append((rank, path, body))
    if _HAVE_ARROW and bodies and all(b.endswith(b"\n") for _, _, b in bodies):
        counts = np.array([b.count(b"\n") for _, _, b in bodies])
        try:
            table = pa_json.read_json(io.BytesIO(b"".join(b for _, _, b in bodies)), read_options=_READ,
                                      parse_options=_PARSE)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            table = None
        if (table is not None and len(table) == counts.sum()
                and not any(table[f].null_count for f in REQUIRED_STEP_FIELDS)):
            ranks = np.repeat(np.array([r for r, _, _ in bodies], dtype="int32"), counts)
            return None, [table.append_column("rank", pa.array(ranks))]
    parts = []
    for rank, path, body in bodies:
        steps = _parse_body(body, run_id, path, problems)
        if steps is not None:
            parts.append(_with_rank(steps, rank))
    return None, parts


def _steps_frame(parts: list[tuple[int, Any]], run_ids: list[str]) -> pd.DataFrame:
    """(run index, steps with a rank column) parts -> one DataFrame with a categorical run_id."""
    columns = ["run_id", "rank", *STEP_FIELDS]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "run_id" else STEP_FIELDS.get(c, "int32"))
                             for c in columns})
    if _HAVE_ARROW:
        tables = [t.append_column("run_index", pa.repeat(pa.scalar(i, pa.int32()), len(t))) for i, t in parts]
        frame = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    else:
        frame = pd.DataFrame.from_records([{**r, "run_index": i} for i, records in parts for r in records])
        for name, kind in STEP_FIELDS.items():
            values = pd.to_numeric(frame[name], errors="coerce") if name in frame else \
                pd.Series(np.nan, index=frame.index)
            frame[name] = values.astype(kind) if values.notna().all() else values.astype("float64")
    frame.insert(0, "run_id", pd.Categorical.from_codes(frame.pop("run_index").to_numpy(), categories=run_ids))
    frame.insert(1, "rank", frame.pop("rank").astype("int32"))
    # logs written before profiled steps were marked: none was (their windows were within the warm-up)
    frame["profiled"] = frame["profiled"].astype("boolean").fillna(False).astype(bool)
    rest = [c for c in frame.columns if c not in columns]
    return frame[[c for c in columns if c in frame] + rest]


# --- telemetry and commbench -------------------------------------------------------------------

def _read_telemetry(path: Path, run_id: str, problems: _Problems) -> list[dict]:
    records = []
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as error:
        problems.add(run_id, path, None, f"unreadable: {error}")
        return records
    bad = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None
        if not isinstance(record, dict):
            problems.add(run_id, path, number, "corrupt telemetry line; skipped", warn=False)
            bad += 1
            continue
        records.append(_flatten(record, "", {"run_id": run_id}))
    if bad:
        warnings.warn(f"{path}: skipped {bad} unreadable telemetry line(s)", LogWarning, stacklevel=3)
    return records


def _read_commbench(path: Path, root: Path, problems: _Problems) -> list[dict]:
    source = path.relative_to(root).as_posix() if path != root else path.name
    obj, error = _read_json(path)
    if isinstance(obj, dict):  # tolerate {"results": [...], ...} wrappers
        obj = obj.get("results", obj.get("measurements"))
    if not isinstance(obj, list):
        problems.add(source, path, None, error or "commbench file is not a list of measurements; skipped")
        return []
    return [{"source": source, **r} for r in obj if isinstance(r, dict)]


# --- the entry points --------------------------------------------------------------------------

def load_campaign(root: Path, *, steps_of_all_runs: bool = False) -> Campaign:
    """Read every run below root. Steps are read for completed runs only (they are the ones that count),
    or for every run with a usable header when `steps_of_all_runs`."""
    root = Path(root)
    problems = _Problems()
    rows: list[dict] = []
    parts: list[tuple[int, Any]] = []
    telemetry: list[dict] = []
    run_ids: list[str] = []
    to_read: list[tuple[int, dict, dict[int, Path]]] = []
    for run_dir in find_run_dirs(root):
        row, rank_files = _run_row(run_dir, root, problems)
        if row["status"] == "completed" or (steps_of_all_runs and row["status"] != "unsupported"):
            to_read.append((len(rows), row, rank_files))
        rows.append(row)
        run_ids.append(row["run_id"])
        for name in sorted(os.listdir(run_dir)):
            if TELEMETRY.match(name):
                telemetry += _read_telemetry(run_dir / name, row["run_id"], problems)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        results = pool.map(lambda item: _read_run_logs(item[1]["run_id"], item[2], problems), to_read)
        for (run_index, row, _), (update, run_parts) in zip(to_read, results):
            if update is not None:
                row.update(update)
            elif row["status"] == "completed" and not run_parts:
                row.update(status="incomplete", reason="the rank logs hold no step")
            parts += [(run_index, t) for t in run_parts]
    runs = _tidy_runs(rows)
    # a run demoted while its logs were read must not keep steps
    bad = set(runs.loc[runs["status"] != "completed", "run_id"]) if not steps_of_all_runs else set()
    parts = [p for p in parts if run_ids[p[0]] not in bad]
    commbench: list[dict] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if COMMBENCH.match(name):
                commbench += _read_commbench(Path(dirpath) / name, root, problems)
    commbench_frame = pd.DataFrame(commbench)
    for column in COMMBENCH_FIELDS:
        if column not in commbench_frame:
            commbench_frame[column] = pd.Series(dtype="float64")
    return Campaign(root=root, runs=runs, steps=_steps_frame(parts, run_ids), telemetry=pd.DataFrame(telemetry),
                    commbench=commbench_frame, problems=problems.frame())


def load_runs(root: Path) -> pd.DataFrame:
    """One row per run directory: the summary's fields, `status`, and `reason` for runs not counted.

    A directory without summary.json is `incomplete` (a run that died or is still running); a summary
    that cannot be parsed is `corrupt`; an unknown schema_version is `unsupported`. Only
    status == 'completed' rows carry metrics. Rank logs are not read (see load_campaign).
    """
    root = Path(root)
    problems = _Problems()
    rows = [_run_row(run_dir, root, problems)[0] for run_dir in find_run_dirs(root)]
    return _tidy_runs(rows)


INT_COLUMNS = ("world_size", "num_nodes", "per_gpu_batch", "global_batch", "repeat", "measured_steps",
               "measured_samples", "warmup_steps", "schema_version")


def _tidy_runs(rows: list[dict]) -> pd.DataFrame:
    """Rows -> the runs table; counts stay integers (nullable) even where a failed run lacks them."""
    runs = pd.DataFrame(rows)
    if runs.empty:
        return pd.DataFrame(columns=["run_id", "run_dir", "cell", "status", "reason"])
    for column in INT_COLUMNS:
        if column in runs:
            numeric = pd.to_numeric(runs[column], errors="coerce")
            if (numeric.dropna() % 1 == 0).all():
                runs[column] = numeric.astype("Int64")
    return runs


def _parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns that mix types (an int in one run, a string in another) become text."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column].dropna()}
            if len(kinds) > 1:
                frame[column] = frame[column].map(lambda v: None if v is None or v != v else str(v))
    return frame


def export_parquet(campaign: Campaign, out: Path) -> list[Path]:
    """Write runs/steps/telemetry/commbench/problems as Parquet files in out (a new or empty folder)."""
    from benchmarks.errors import ConfigError

    if not _HAVE_ARROW:
        raise ConfigError("--parquet needs the pyarrow package; run 'pip install pyarrow' in the ddlbench environment")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--parquet {out} is not empty (never overwritten); pass a new folder")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("runs", "steps", "telemetry", "commbench", "problems"):
        path = out / f"{name}.parquet"
        _parquet_safe(getattr(campaign, name)).to_parquet(path, index=False)
        written.append(path)
    return written


REFERENCES = {"aach2023": "aach2023_breakdown.csv"}


def load_reference(name: str) -> pd.DataFrame:
    """A shipped reference table (analysis/reference/), e.g. seed study A's DDP breakdown."""
    from benchmarks.errors import ConfigError

    if name not in REFERENCES:
        raise ConfigError(f"--reference {name} is not known; use one of: {', '.join(REFERENCES)}")
    return pd.read_csv(Path(__file__).resolve().parent / "reference" / REFERENCES[name])
