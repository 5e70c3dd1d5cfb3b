"""Run directories (any depth below a root) -> tidy pandas DataFrames.

Tables (column names follow docs/architecture.md):
- runs: one row per run directory: `run_id` (path below the root), `status`, `reason`, the
  summary's fields, the resolved config flattened as `config.<key>` and provenance as `meta.<key>`;
- steps: one row per rank per logged step of every *completed* run (rank<R>.jsonl);
- telemetry: one row per sample of telemetry*.jsonl (whatever keys are there, flattened);
- commbench: one row per measurement of commbench*.json (op, size_bytes, algbw_gb_s, ...);
- traces: one row per rank of every completed run with a trace window (breakdown_rank<R>.json):
  the window's seconds by class (TRACE_COLUMNS);
- evals: one row per evaluation (eval.jsonl) of every completed run: EVAL_FIELDS, and the training
  progress (EVAL_OPTIONAL_FIELDS: train_samples, train_s, epochs) where the file has it, else null;
- ranks: one row per rank log of every completed run: `run_id`, `rank`, and from its header line the
  `host` it ran on and its `local_rank` (null where the header lacks them);
- problems: every line, file or field that was skipped, and why.

Only `status == "completed"` runs are counted; everything else stays in `runs` with its reason.

This module sanitises: no bytes in any file of a run directory make it raise, and what it hands on
is well typed, so metrics and report never check types:
- a step line is kept only when every field of rundir.STEP_FIELDS it holds has its type (integers
  >= 0, true/false, seconds finite and >= 0), the required ones are there, and its step was not
  logged before by the same rank; any other line is skipped and listed in `problems`. The steps
  table has STEP_FIELDS' dtypes (an optional integer field that some line lacks is nullable Int64;
  a missing `profiled` is False, as rundir.is_measured reads it);
- a summary.json field of the wrong type (world_size "4", a list for wall_s, NaN for a count) is
  ignored and listed in `problems`; the run's identity (framework, loader, model, precision, batch,
  campaign, repeat, cache) comes from config.yaml and its size from meta.json, the same sources as
  its cell hash, and a summary that disagrees is listed too. A completed summary that leaves the
  run unidentified, or whose world size differs from meta.json's, makes the run `corrupt`;
- a run counts only with a rank log for every rank 0..world_size-1 (0..num_processes-1 where meta.json
  says one process drives several GPUs: DataParallel), each with a measured step; summary.json's memory
  fields are counts (lists of counts or null, per rank, as JSON text);
- telemetry lines need a finite `t_s` (and integer rank/gpu), commbench measurements their seven
  fields (and the suite's in_place, wrong and count of the right type where present); other values
  become plain scalars (lists as JSON text, text as valid UTF-8).
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import re
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks import rundir
from benchmarks.rundir import EVAL_FIELDS, EVAL_FILE, EVAL_OPTIONAL_FIELDS
from benchmarks.tracereduce import TraceBreakdown

try:  # the fast path: Arrow's multi-threaded JSON-lines reader (pure Python fallback below)
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pa_json
except ImportError:  # pragma: no cover - exercised by monkeypatching _HAVE_ARROW
    pa = pc = pa_json = None

SUMMARY, META, CONFIG = rundir.SUMMARY, rundir.META, rundir.CONFIG
SUPPORTED_SCHEMA_VERSIONS = frozenset({1})
RANK_LOG = re.compile(r"rank(\d+)\.jsonl$")
TELEMETRY = re.compile(r"telemetry.*\.jsonl$")
COMMBENCH = re.compile(r"commbench.*\.json$")
BREAKDOWN = re.compile(r"breakdown_rank(\d+)\.json$")  # benchmarks/tracereduce.py breakdown_path

# the per-step record written by benchmarks/loop.py (schema_version 1)
STEP_FIELDS, REQUIRED_STEP_FIELDS = rundir.STEP_FIELDS, rundir.REQUIRED_STEP_FIELDS
COMMBENCH_FIELDS = ["op", "size_bytes", "algbw_gb_s", "busbw_gb_s", "time_s", "world_size", "backend"]
# meta.json keys too bulky or too free-form for a table column (kept in the file)
META_SKIP = {"argv", "env", "framework", "loader", "hardware.nvidia_smi_topo"}
# documents nested deeper or holding more values than this are no file ddlbench writes (YAML
# aliases can make both, even a cycle, from a few bytes)
MAX_NESTING = 32
MAX_VALUES = 100_000
INT64_MAX = 2**63 - 1
MAX_MAGNITUDE = 1e300  # a telemetry value beyond this is none: no counter or rate comes near it
BOM = b"\xef\xbb\xbf"

_HAVE_ARROW = pa is not None


class LogWarning(UserWarning):
    """A log line, file or field was skipped (corrupt, truncated, wrong type, unknown schema)."""


@dataclass(slots=True)
class Campaign:
    """Every table of one runs directory."""

    root: Path
    runs: pd.DataFrame
    steps: pd.DataFrame
    telemetry: pd.DataFrame
    commbench: pd.DataFrame
    problems: pd.DataFrame = field(default_factory=pd.DataFrame)
    traces: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TRACE_COLUMNS))  # a row per rank
    evals: pd.DataFrame = field(default_factory=lambda: _evals_frame([]))  # a row per evaluation
    ranks: pd.DataFrame = field(default_factory=lambda: _ranks_frame([]))  # a row per rank log: its host

    @property
    def counted(self) -> pd.DataFrame:
        """The runs that count: completed ones."""
        return self.runs[self.runs["status"] == "completed"]

    @property
    def excluded(self) -> pd.DataFrame:
        """The runs that do not count, with their reason."""
        return self.runs[self.runs["status"] != "completed"]


def _one_line(text: str) -> str:
    """Reasons and problems are one line of valid UTF-8 (YAML errors span lines; JSON may hold lone surrogates)."""
    return _text(" ".join(str(text).split()))


class _Problems:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, run_id: str, path: Path | str, line: int | None, problem: str, *, warn: bool = True) -> None:
        problem = _one_line(problem)
        self.rows.append({"run_id": run_id, "file": _text(str(path)), "line": line, "problem": problem})
        if warn:
            where = f"{path}:{line}" if line else str(path)
            warnings.warn(_text(f"{where}: {problem}"), LogWarning, stacklevel=3)

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=["run_id", "file", "line", "problem"])
        frame["line"] = frame["line"].astype("Int64")
        return frame


# --- values: what a field must be, and plain scalars for table cells -----------------------------


def _text(value: str) -> str:
    """Valid UTF-8 text: a lone surrogate (JSON's "\\ud800", an odd file name) becomes a backslash escape."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def _shown(value: Any) -> str:
    """A value as a reason quotes it: its repr, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _as_float(value: Any) -> float | None:
    """A JSON/YAML number as a float; None for anything else (true/false, text, an int beyond a double)."""
    if type(value) not in (int, float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= INT64_MAX


def _is_size(value: Any) -> bool:
    return type(value) is int and 1 <= value <= INT64_MAX


def _is_seconds(value: Any) -> bool:
    number = _as_float(value)
    return number is not None and math.isfinite(number) and number >= 0


def _is_number(value: Any) -> bool:
    return _as_float(value) is not None


def _is_fraction(value: Any) -> bool:
    number = _as_float(value)
    return number is not None and 0.0 <= number <= 1.0


def _is_flag(value: Any) -> bool:
    return type(value) is bool


def _is_text(value: Any) -> bool:
    return type(value) is str


def _is_counts(value: Any) -> bool:
    # a per-rank list (summary.json's *_by_rank): integers >= 0, or null where a rank measured none
    return type(value) is list and len(value) <= MAX_VALUES and all(v is None or _is_count(v) for v in value)


def _is_name(value: Any) -> bool:
    # a name Hydra may have written as a number (run.campaign=2026) is that number's text
    return (type(value) is str and value.strip() != "") or _is_count(value)


# kind -> (check, what was expected, the value as its column holds it)
KINDS: dict[str, tuple[Callable[[Any], bool], str, Callable[[Any], Any]]] = {
    "count": (_is_count, "an integer >= 0", int),
    "size": (_is_size, "an integer >= 1", int),
    "seconds": (_is_seconds, "a finite number >= 0", float),
    "number": (_is_number, "a number", float),
    "fraction": (_is_fraction, "a fraction in [0, 1]", float),
    "flag": (_is_flag, "true or false", bool),
    "text": (_is_text, "a string", _text),
    "name": (_is_name, "a non-empty string", lambda v: _text(str(v))),
    "counts": (_is_counts, "a list of integers >= 0 or null", lambda v: _json_text(v)),
}
STEP_KINDS = {"int64": "count", "bool": "flag", "float64": "seconds"}
# summary.json fields (rundir.completed_summary / failed_summary) and what each must be
SUMMARY_FIELDS = {
    "status": "text",
    "finished": "text",
    "error": "text",
    "framework": "name",
    "loader": "name",
    "model": "name",
    "precision": "name",
    "campaign": "name",
    "sample_unit": "name",  # what throughput_img_s counts: images or sequences (absent before: images)
    "world_size": "size",
    "num_nodes": "size",
    "per_gpu_batch": "size",
    "global_batch": "size",
    "warmup_steps": "count",
    "repeat": "count",
    "measured_steps": "count",
    "measured_samples": "count",
    "time_s": "number",
    "wall_s": "number",
    "throughput_img_s": "number",
    "per_gpu_img_s": "number",
    "last_loss": "number",
    "runtime_s": "number",
    # device memory (rundir.memory_summary; null on CPU runs) and a failed run's cause
    "num_processes": "size",
    "peak_allocated_bytes": "count",
    "peak_reserved_bytes": "count",
    "peak_allocated_bytes_by_rank": "counts",
    "peak_reserved_bytes_by_rank": "counts",
    "out_of_memory": "flag",
    # time to accuracy (rundir.TARGET_FIELDS; absent, or null, without run.target_top1 and in older summaries)
    "target_top1": "fraction",
    "target_reached": "flag",
    "time_to_target_s": "seconds",
    "samples_to_target": "count",
    "steps_to_target": "count",
}
# the run's identity columns: from config.yaml (meta.json for the size), as its cell hash is
SETTINGS = {
    "framework": ("framework.name", "name"),
    "loader": ("loader.name", "name"),
    "precision": ("precision.name", "name"),
    "per_gpu_batch": ("run.per_gpu_batch", "size"),
    "campaign": ("run.campaign", "name"),
    "repeat": ("run.repeat", "count"),
    "cache": ("data.cache", "name"),
}
SIZE = {"world_size": "size", "num_nodes": "size"}
# meta.json's process count, where one process drives several GPUs (DataParallel): rank logs 0..num_processes-1
PROCESSES = "num_processes"
# what a completed run cannot be counted without
IDENTIFYING = ("framework", "loader", "model", "precision", "per_gpu_batch")
# columns of the runs table that a summary.json key must not overwrite
RESERVED = {"run_id", "run_dir", "cell", "status", "reason", "cell_hash", "group_hash", "strong_group_hash", "cache"}
# breakdown_rank<R>.json: the trace breakdown's seconds (benchmarks/tracereduce.py TraceBreakdown) per rank
TRACE_SECONDS = tuple(
    f.name for f in dataclasses.fields(TraceBreakdown) if f.name.endswith("_s") and not f.name.startswith("collectives")
)
# eval.jsonl (benchmarks/evaluate.py): one row per evaluation of a completed run; the optional fields
# (training progress: train_samples, train_s, epochs) are null where an older file lacks them
EVAL_COLUMNS = ["run_id", *EVAL_FIELDS, *EVAL_OPTIONAL_FIELDS]
EVAL_OPTIONAL_KINDS = {"int64": "count", "float64": "seconds"}
TRACE_COLUMNS = [
    "run_id",
    "rank",
    "source",
    "steps",
    "first_step",
    "last_step",
    *TRACE_SECONDS,
    "allreduce_s",
    "allreduce_exposed_s",
]
COMMBENCH_KINDS = {
    "op": "name",
    "backend": "name",
    "world_size": "size",
    "size_bytes": "size",
    "time_s": "seconds",
    "algbw_gb_s": "seconds",
    "busbw_gb_s": "seconds",
}
# the collective suite's fields (benchmarks/commbench/suite.py): typed where present, null where absent (files
# written before the suite, the GPU tests' records) and wrong null where the check was skipped; always columns
# (nullable: boolean, Int64), so a measurement's placement and check are never a missing key
COMMBENCH_OPTIONAL_KINDS = {"in_place": "flag", "wrong": "count", "count": "size"}
COMMBENCH_OPTIONAL_DTYPES = {"in_place": "boolean", "wrong": "Int64", "count": "Int64"}


def _checked(value: Any, kind: str) -> tuple[Any, str | None]:
    """(value as its column holds it, None), or (None, 'what was expected') when it is not of the kind."""
    check, expected, convert = KINDS[kind]
    return (convert(value), None) if check(value) else (None, expected)


def _scalar(value: Any) -> Any:
    """A plain table cell: None, bool, str (valid UTF-8), an int64 or a float; other values as text."""
    if value is None or type(value) in (bool, float):
        return value
    if type(value) is str:
        return _text(value)
    if type(value) is int:
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _json_text(value)
    return _text(str(value))  # a YAML date, binary, ...


def _json_text(value: Any) -> str:
    """A list as JSON text (a table cell stays a scalar, Parquet-safe); str() where JSON cannot say it."""
    try:
        return _text(json.dumps(value, default=str))
    except (TypeError, ValueError):  # keys JSON has no form for (a YAML date), a cycle
        return _text(str(value))


def _shape_problem(obj: Any, name: str) -> str | None:
    """Why a parsed document is none ddlbench writes: nested deeper than MAX_NESTING or holding over
    MAX_VALUES values (counted with repeats, so a cycle of YAML aliases ends too); None when it is fine."""
    stack, seen = [(obj, 0)], 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return f"{name} holds over {MAX_VALUES:,} values (or a cycle of YAML aliases); expected a small document"
        if depth > MAX_NESTING:
            return f"{name} is nested over {MAX_NESTING} levels deep; expected a small document"
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack += [(v, depth + 1) for v in value]
    return None


def _json_type(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "true/false", type(None): "null"}.get(
        type(value), "number"
    )


# --- run directories ---------------------------------------------------------------------------


# a run directory with neither a summary nor a rank log: rank 0 wrote config.yaml (and meta.json), then the
# launch died (or is still starting); the cause is in what the launcher printed, not in the directory
NO_STEP_RECORDS = (
    "no step records: the launch died before its first step (or is still starting); see the launcher's output"
)


def find_run_dirs(root: Path) -> list[Path]:
    """Every directory below root (root included) that looks like a run: config.yaml, meta.json, summary.json
    or a rank log (rundir.holds_a_run's files: rank 0 writes config.yaml first, so a launch that died right
    after is a run that did not count, never one that is not there)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if {META, SUMMARY} & set(filenames) or any(RANK_LOG.match(f) for f in filenames):
            found.append(Path(dirpath))
        elif CONFIG in filenames and _is_run_config(Path(dirpath) / CONFIG):
            found.append(Path(dirpath))
    return sorted(found)


def _is_run_config(path: Path) -> bool:
    """A config.yaml that a rank wrote (a resolved config: a top-level `run:` block and no `defaults:` list),
    not a Hydra config root such as conf/config.yaml or another tool's file."""
    try:
        text = path.read_text(errors="replace")[:200_000]
    except OSError:
        return False
    return re.search(r"^run:", text, re.M) is not None and re.search(r"^defaults:", text, re.M) is None


def _flatten(obj: dict, prefix: str, out: dict, skip: set[str] = frozenset()) -> dict:
    """Nested dicts -> dotted keys; lists become JSON text so every cell is a plain scalar (Parquet-safe).
    Callers check the document's shape first (_shape_problem), so the recursion is shallow."""
    for key, value in obj.items():
        name = f"{prefix}{_text(str(key))}"
        if name.split(".", 1)[-1] in skip:
            continue
        if isinstance(value, dict):
            _flatten(value, f"{name}.", out, skip)
        else:
            out[name] = _scalar(value)
    return out


def _read_json(path: Path) -> tuple[Any, str | None]:
    """A JSON file (UTF-8) of sane shape, or (None, one line saying why not)."""
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as error:
        return None, f"unreadable {path.name}: {error.strerror or error}"
    except UnicodeDecodeError as error:
        return None, f"unreadable {path.name}: not UTF-8 ({error.reason} at byte {error.start})"
    except json.JSONDecodeError as error:
        return None, f"unreadable {path.name}: {error}"
    except ValueError as error:  # an integer of more than 4300 digits
        return None, f"unreadable {path.name}: {error}"
    except RecursionError:
        return None, f"unreadable {path.name}: nested too deeply for a JSON document"
    problem = _shape_problem(obj, path.name)
    return (None, problem) if problem else (obj, None)


def _read_config(path: Path) -> tuple[dict | None, str | None]:
    """config.yaml as a dict, or (None, why) when it is unreadable or no mapping."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        cfg = yaml.load(path.read_bytes().decode("utf-8"), Loader=loader)
    except OSError as error:
        return None, f"unreadable {CONFIG}: {error.strerror or error}"
    except UnicodeDecodeError as error:
        return None, f"unreadable {CONFIG}: not UTF-8 ({error.reason} at byte {error.start})"
    except (ValueError, yaml.YAMLError) as error:  # ValueError: a date such as 2026-13-45
        return None, f"unreadable {CONFIG}: {error}"
    except RecursionError:
        return None, f"unreadable {CONFIG}: nested too deeply"
    if not isinstance(cfg, dict):
        return None, f"{CONFIG} holds a {type(cfg).__name__}, expected a mapping of settings"
    return (None, problem) if (problem := _shape_problem(cfg, CONFIG)) else (cfg, None)


def _identify(row: dict, cfg: dict | None) -> str | None:
    """The run's cell (rundir's run key: every setting + its size) and its weak and strong scaling
    curves, from config.yaml and meta.json's world size and node count; why not, when they are unknown."""
    world, nodes = row.get("world_size"), row.get("num_nodes")
    if cfg is None:
        return f"no readable {CONFIG}: the run's settings are unknown, so it belongs to no cell"
    if not (_is_size(world) and _is_size(nodes)):
        return f"{META} has no world_size and num_nodes (integers >= 1): the run's size is unknown, so it belongs to no cell"
    try:  # settings no run writes raise: a list of mappings, a YAML date as a key, an infinite batch
        row.update(
            cell_hash=rundir.cell_hash(cfg, world_size=world, num_nodes=nodes),
            group_hash=rundir.group_hash(cfg, world_size=world, mode="weak"),
            strong_group_hash=rundir.group_hash(cfg, world_size=world, mode="strong"),
        )
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
        return f"{CONFIG} holds settings no run writes ({error}), so the run belongs to no cell"
    return None


def _schema_problem(version: Any, where: str) -> str | None:
    if _is_count(version) and version in SUPPORTED_SCHEMA_VERSIONS:
        return None
    allowed = ", ".join(map(str, sorted(SUPPORTED_SCHEMA_VERSIONS)))
    return (
        f"schema_version {_shown(version)} in {where} is not supported (this ddlbench reads {allowed}); "
        f"analyse it with the ddlbench version that wrote it"
    )


def _read_config_into(run_dir: Path, names: list[str], run_id: str, row: dict, problems: _Problems) -> dict | None:
    """config.yaml flattened into `config.<key>` columns, and the identity columns it names (SETTINGS)."""
    if CONFIG not in names:
        return None
    cfg, error = _read_config(run_dir / CONFIG)
    if cfg is None:
        problems.add(run_id, run_dir / CONFIG, None, error)
        return None
    _flatten(cfg, "config.", row)
    for column, (key, kind) in SETTINGS.items():
        if (raw := _raw_setting(cfg, key)) is None:
            continue
        row[column], expected = _checked(raw, kind)
        if expected:
            problems.add(run_id, run_dir / CONFIG, None, f"{key} {_shown(raw)} is not {expected}; ignored")
    arch, depth = _raw_setting(cfg, "model.arch"), _raw_setting(cfg, "model.depth")
    width, batch_norm = _raw_setting(cfg, "model.width"), _raw_setting(cfg, "model.batch_norm")
    residual, size = _raw_setting(cfg, "model.residual"), _raw_setting(cfg, "model.size")
    if (
        _is_name(arch)
        and (depth is None or _is_count(depth))
        and (width is None or (isinstance(width, int | float) and not isinstance(width, bool)))
        and all(v is None or isinstance(v, bool) for v in (batch_norm, residual))
        and (size is None or _is_name(size))
    ):
        row["model"] = rundir.model_name(
            _text(str(arch)),
            depth,
            width=width,
            batch_norm=batch_norm,
            residual=True if residual is None else residual,
            size=None if size is None else _text(str(size)),
        )
    return cfg


def _raw_setting(cfg: dict, key: str) -> Any:
    """A dotted key of a nested config, as YAML gave it (None when absent)."""
    value: Any = cfg
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _read_meta_into(run_dir: Path, names: list[str], run_id: str, row: dict, problems: _Problems) -> None:
    """meta.json flattened into `meta.<key>` columns (META_SKIP stays in the file), its world size and
    node count checked into `world_size` / `num_nodes`, and `unsupported` for an unknown schema_version."""
    if META not in names:
        return
    meta, error = _read_json(run_dir / META)
    if not isinstance(meta, dict):
        problems.add(
            run_id, run_dir / META, None, error or f"{META} holds a JSON {_json_type(meta)}, expected an object"
        )
        return
    row["meta.schema_version"] = _scalar(meta.get("schema_version"))
    _flatten({k: v for k, v in meta.items() if k != "schema_version"}, "meta.", row, META_SKIP)
    if (problem := _schema_problem(meta.get("schema_version"), META)) is not None:
        row.update(status="unsupported", reason=problem)
    for column, kind in SIZE.items():
        if (raw := meta.get(column)) is not None:
            row[column], expected = _checked(raw, kind)
            if expected:
                problems.add(run_id, run_dir / META, None, f"{column} {_shown(raw)} is not {expected}; ignored")
    if (raw := meta.get(PROCESSES)) is not None:
        row[PROCESSES], expected = _checked(raw, "size")
        if expected:
            problems.add(run_id, run_dir / META, None, f"{PROCESSES} {_shown(raw)} is not {expected}; ignored")


def _copy_summary(summary: dict, path: Path, run_id: str, row: dict, problems: _Problems) -> None:
    """summary.json's fields into the row: each known field only with its type (SUMMARY_FIELDS), other
    keys only as plain scalars and never over the table's own columns. Where config.yaml already
    identifies the run it wins, and a summary that disagrees is listed; the size is meta.json's alone."""
    for key, value in summary.items():
        key = _text(str(key))
        if key == "schema_version":
            row[key] = value if _is_count(value) else None  # an unknown one excludes the run, with the value
        elif key in RESERVED or "." in key:
            if key not in ("status", "cell_hash"):  # read below; the hash is recomputed from config.yaml
                problems.add(run_id, path, None, f"key {key!r} would overwrite the runs table's own column; ignored")
        elif key in SUMMARY_FIELDS:
            if value is None:
                continue
            value, expected = _checked(value, SUMMARY_FIELDS[key])
            if expected:
                problems.add(run_id, path, None, f"{key} {_shown(summary[key])} is not {expected}; ignored")
            elif key in SIZE or key == PROCESSES:
                continue  # meta.json's alone, as in the cell hash; _summary_status compares them
            elif row.get(key) is None:
                row[key] = value
            elif row[key] != value:
                problems.add(
                    run_id,
                    path,
                    None,
                    f"{key} {_shown(value)} differs from {CONFIG}'s {_shown(row[key])}; {CONFIG}'s is used",
                )
        elif type(value) in (str, bool, float) or (type(value) is int and -INT64_MAX - 1 <= value <= INT64_MAX):
            row[key] = _scalar(value)  # a field this version does not know: kept when it is a plain scalar


def _summary_status(summary: dict, row: dict, cfg: dict | None, rank_files: dict[int, Path]) -> tuple[str, str | None]:
    """(status, reason) of a run whose summary.json is readable and of a supported schema."""
    status = summary.get("status")
    if status in ("failed", "interrupted"):
        error = summary.get("error")
        reason = f"{status}: {_one_line(error) if isinstance(error, str) and error.strip() else 'no error recorded'}"
        # every rank's own error (launchers/supervise.py): the one that failed first may not be rank 0
        ranks = summary.get("rank_errors")
        if isinstance(ranks, dict):
            shown = [f"rank {r}: {_one_line(e)[:160]}" for r, e in ranks.items() if isinstance(e, str) and e != error]
            if shown:
                reason += "; the ranks said: " + "; ".join(shown[:4])
        return status, reason
    if status != "completed":
        return "corrupt", (
            f"{SUMMARY} status {_shown(status)} is not one a run writes (completed, failed, interrupted)"
        )
    if (problem := _identify(row, cfg)) is not None:
        return "corrupt", problem
    for column in SIZE:
        if _is_size(summary.get(column)) and summary[column] != row[column]:
            return "corrupt", (
                f"{SUMMARY} {column} {summary[column]} but {META} {row[column]}: which size ran is unknown"
            )
    unknown = [c for c in IDENTIFYING if row.get(c) is None]
    if unknown:
        return "corrupt", (
            f"the run's {', '.join(unknown)} unknown: neither {CONFIG} nor {SUMMARY} gives it, so it belongs to no cell"
        )
    processes = row.get(PROCESSES) if row.get(PROCESSES) is not None else row["world_size"]
    if processes > row["world_size"]:
        return "corrupt", f"{META} {PROCESSES} {processes} exceeds its world_size {row['world_size']}"
    return _rank_files_status(rank_files, processes)


def _rank_files_status(rank_files: dict[int, Path], world: int) -> tuple[str, str | None]:
    """completed when there is a rank log for each rank 0..world-1 and for no other rank."""
    if not rank_files:
        return "incomplete", f"{SUMMARY} says completed but there is no rank<R>.jsonl"
    extra = sorted(r for r in rank_files if r >= world)
    if extra:
        shown = ", ".join(rank_files[r].name for r in extra[:3]) + (" ..." if len(extra) > 3 else "")
        return "corrupt", f"rank log(s) {shown} beyond world_size {world}: the logs are of another run"
    if len(rank_files) < world:
        missing: list[int] = []
        rank = 0
        while len(missing) < 3 and rank < world:  # at most len(rank_files) + 3 steps, whatever the world size
            if rank not in rank_files:
                missing.append(rank)
            rank += 1
        more = world - len(rank_files) - len(missing)
        return "incomplete", (
            f"no rank log for rank(s) {', '.join(map(str, missing))}{f' and {more} more' if more else ''}"
            f" of world_size {world}"
        )
    return "completed", None


def _rank_files(run_dir: Path, names: list[str], run_id: str, problems: _Problems) -> dict[int, Path]:
    """rank -> rank<R>.jsonl; a name the app does not write (rank01.jsonl beside rank1.jsonl) is listed, not read."""
    files = {}
    for name in names:
        if (m := RANK_LOG.match(name)) is None:
            continue
        if name == f"rank{int(m.group(1))}.jsonl":
            files[int(m.group(1))] = run_dir / name
        else:
            problems.add(
                run_id,
                run_dir / name,
                None,
                "not a rank log name the app writes (rank<R>.jsonl, R without leading zeros); skipped",
            )
    return files


def _run_row(run_dir: Path, root: Path, problems: _Problems) -> tuple[dict, dict[int, Path]]:
    run_id = _text(run_dir.relative_to(root).as_posix() if run_dir != root else run_dir.name)
    row: dict[str, Any] = {
        "run_id": run_id,
        "run_dir": str(run_dir),
        "cell": _text(run_dir.name),
        "status": None,
        "reason": None,
    }
    try:
        names = os.listdir(run_dir)
    except OSError as error:
        row.update(status="corrupt", reason=f"unreadable directory: {error.strerror or error}")
        return row, {}
    rank_files = _rank_files(run_dir, names, run_id, problems)
    # identify the cell even when there is no summary (from the config and meta.json)
    cfg = _read_config_into(run_dir, names, run_id, row, problems)
    _read_meta_into(run_dir, names, run_id, row, problems)
    if SUMMARY not in names:
        if row["status"] is None and not rank_files:
            row.update(status="incomplete", reason=NO_STEP_RECORDS)
        elif row["status"] is None:
            row.update(status="incomplete", reason=f"no {SUMMARY} (the run died or is still running)")
        return row, rank_files
    summary, error = _read_json(run_dir / SUMMARY)
    if not isinstance(summary, dict):
        reason = error or f"{SUMMARY} holds a JSON {_json_type(summary)}, expected an object"
        problems.add(run_id, run_dir / SUMMARY, None, reason)
        if row["status"] is None:
            row.update(status="corrupt", reason=_one_line(reason))
        return row, rank_files
    if row["status"] is not None:  # unsupported meta.json wins
        return row, rank_files
    _copy_summary(summary, run_dir / SUMMARY, run_id, row, problems)
    if (problem := _schema_problem(summary.get("schema_version"), SUMMARY)) is not None:
        row.update(status="unsupported", reason=problem)
    else:
        status, reason = _summary_status(summary, row, cfg, rank_files)
        row.update(status=status, reason=reason)
    return row, rank_files


# --- rank logs ---------------------------------------------------------------------------------


def _json_line(line: bytes) -> tuple[Any, str | None]:
    """One log line's JSON (invalid UTF-8 replaced: Arrow ignores it in the fields nobody reads), or why not."""
    try:
        return json.loads(line.decode("utf-8", "replace")), None
    except json.JSONDecodeError as error:
        return None, f"corrupt line ({error.msg})"
    except ValueError as error:  # an integer of more than 4300 digits
        return None, f"corrupt line ({error})"
    except RecursionError:
        return None, "corrupt line (nested too deeply)"


def _step_record(record: Any) -> tuple[dict | None, str | None]:
    """A step line's record with exactly STEP_FIELDS (floats as floats, absent as None), or why it is none."""
    if not isinstance(record, dict):
        return None, f"a JSON {_json_type(record)}, expected a step record (an object)"
    missing = [f for f in REQUIRED_STEP_FIELDS if record.get(f) is None]
    if missing:
        return None, f"step record without {', '.join(missing)}"
    clean = {}
    for name, dtype in STEP_FIELDS.items():
        value = record.get(name)
        if value is not None:
            value, expected = _checked(value, STEP_KINDS[dtype])
            if expected:
                return None, f"{name} {_shown(record[name])} is not {expected}"
        clean[name] = value
    return clean, None


def _parse_lines_python(body: bytes, first_line: int, run_id: str, path: Path, problems: _Problems) -> list[dict]:
    """Step lines one by one: every line that is no valid step record, or repeats a step, is skipped and named."""
    records: list[dict] = []
    bad: list[str] = []
    seen: set[int] = set()
    lines = body.removeprefix(BOM).split(b"\n")  # Arrow reads a byte-order mark at the start, so this does too
    for index, line in enumerate(lines):
        number = first_line + index
        if not line.strip():
            continue
        record, error = _json_line(line)
        if error is None:
            record, error = _step_record(record)
        if error is None and record["step"] in seen:
            error = f"step {record['step']} logged twice (the first is kept)"
        if error is not None:
            if index == len(lines) - 1 and error.startswith("corrupt line"):  # no newline after it: the writer died
                error = "truncated last line"
            problems.add(run_id, path, number, f"{error}; skipped", warn=False)
            bad.append(f"line {number}: {error}")
            continue
        seen.add(record["step"])
        records.append(record)
    if bad:
        warnings.warn(
            _text(f"{path}: skipped {len(bad)} unreadable line(s): {'; '.join(bad[:3])}"), LogWarning, stacklevel=4
        )
    return records


if _HAVE_ARROW:
    _ARROW_TYPES = {"int64": pa.int64(), "bool": pa.bool_(), "float64": pa.float64()}
    _STEP_SCHEMA = pa.schema([(k, _ARROW_TYPES[v]) for k, v in STEP_FIELDS.items()])
    # fields no step record has are ignored, as the line-by-line reader does
    _PARSE = pa_json.ParseOptions(explicit_schema=_STEP_SCHEMA, unexpected_field_behavior="ignore")
    _READ = pa_json.ReadOptions(use_threads=False, block_size=1 << 24)
    _PANDAS_TYPES = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}


def _line_ends(data: np.ndarray) -> np.ndarray:
    """Where a log's bytes hold a newline. numpy, not bytes.count: numpy lets go of the GIL, so the threads
    that read a campaign's runs scan their logs at once (bytes methods take turns)."""
    return np.flatnonzero(data == ord("\n"))


def _arrow_steps(body: bytes, counts: list[int]):
    """Arrow's reading of step lines (one or more ranks' bodies, `counts` lines each) when it is exactly
    what the line-by-line reader gives: one row per line, every value of its type and range, steps
    rising within each rank. None otherwise (then the line-by-line reader finds and names the bad lines).
    Blank lines, carriage returns (Arrow splits lines at them), lines that do not start with "{" and a
    last line without its newline always go line by line."""
    data = np.frombuffer(body, dtype=np.uint8)
    if (
        not counts
        or min(counts) < 1
        or not body.endswith(b"\n")
        or b"\r" in body
        # every line starts with "{" (so none is blank): a line that is not an object goes line by line, Arrow
        # 26 crashes (SIGSEGV) on a `null` line when given a schema (found by tests/analysis/test_fuzz.py)
        or body[:1] != b"{"
        or (data[_line_ends(data)[:-1] + 1] != ord("{")).any()
    ):
        return None
    try:
        table = pa_json.read_json(io.BytesIO(body), read_options=_READ, parse_options=_PARSE)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if len(table) != sum(counts):
        return None  # two records on one line, or a whitespace-only line
    for name, dtype in STEP_FIELDS.items():
        column = table[name]
        if name in REQUIRED_STEP_FIELDS and column.null_count:
            return None
        if dtype == "bool":
            continue
        ok = pc.greater_equal(column, 0)  # NaN >= 0 is false
        if dtype == "float64":
            ok = pc.and_(ok, pc.is_finite(column))
        if pc.all(ok).as_py() is False:
            return None
    rises = np.diff(table["step"].to_numpy()) > 0  # steps are >= 0 here: no overflow
    rises[np.cumsum(counts)[:-1] - 1] = True  # where the next rank's lines start
    return table if rises.all() else None


def _split_header(data: bytes, run_id: str, path: Path, problems: _Problems) -> tuple[dict | None, bytes]:
    newline = data.find(b"\n")
    head, body = (data, b"") if newline < 0 else (data[:newline], data[newline + 1 :])
    header, _ = _json_line(head.removeprefix(BOM))
    if not isinstance(header, dict) or header.get("kind") != "header":
        problems.add(run_id, path, 1, "no header line (kind=header, schema_version)")
        return None, body
    return header, body


def _parse_body(body: bytes, run_id: str, path: Path, problems: _Problems):
    """One rank's step lines -> an Arrow table (or a list of records without pyarrow); None when no step is readable."""
    if not body.strip():
        return None
    if _HAVE_ARROW:
        table = _arrow_steps(body, [body.count(b"\n")])
        if table is not None:
            return table
        records = _parse_lines_python(body, 2, run_id, path, problems)
        return pa.Table.from_pylist(records, schema=_STEP_SCHEMA) if records else None
    return _parse_lines_python(body, 2, run_id, path, problems) or None


def _with_rank(steps, rank: int):
    if _HAVE_ARROW:
        return steps.append_column("rank", pa.repeat(pa.scalar(rank, pa.int32()), len(steps)))
    return [{**r, "rank": rank} for r in steps]


def _measured_ranks(parts: list) -> set[int]:
    """The ranks with at least one measured step (not warm-up, not profiled: rundir.is_measured)."""
    ranks: set[int] = set()
    for steps in parts:
        if _HAVE_ARROW:
            measured = pc.and_not(pc.invert(steps["warmup"]), pc.fill_null(steps["profiled"], False))
            ranks.update(pc.unique(pc.filter(steps["rank"], measured)).to_pylist())
        else:
            ranks.update(r["rank"] for r in steps if not r["warmup"] and not r["profiled"])
    return ranks


def _header_row(run_id: str, rank: int, header: dict) -> dict:
    """A rank's place from its log's header line (benchmarks/runlog.py): its host (None where the header
    has no host name) and local rank."""
    host, local = header.get("host"), header.get("local_rank")
    return {
        "run_id": run_id,
        "rank": rank,
        "host": _text(host) if _is_text(host) and host.strip() else None,
        "local_rank": local if _is_count(local) else None,
    }


def _read_run_logs(
    run_id: str, rank_files: dict[int, Path], problems: _Problems
) -> tuple[dict | None, list, set[int], list[dict]]:
    """All rank logs of one run -> (status update or None, step tables with a rank column, ranks with a
    measured step, each rank's header row: _header_row).

    Fast path: the ranks' step lines are parsed as one buffer (one Arrow call per run, which releases
    the GIL, so runs parse in parallel threads); anything Arrow reads differently from the line-by-line
    reader falls back to per-file parsing, which names the bad lines."""
    bodies: list[tuple[int, Path, bytes]] = []
    headers: list[dict] = []
    for rank, path in sorted(rank_files.items()):
        try:
            data = path.read_bytes()
        except OSError as error:
            problems.add(run_id, path, None, f"unreadable: {error.strerror or error}")
            reason = f"{path.name} is unreadable ({error.strerror or error})"
            return {"status": "corrupt", "reason": reason}, [], set(), []
        header, body = _split_header(data, run_id, path, problems)
        if header is None:
            return {"status": "corrupt", "reason": f"{path.name} has no header line"}, [], set(), []
        if (problem := _schema_problem(header.get("schema_version"), path.name)) is not None:
            return {"status": "unsupported", "reason": problem}, [], set(), []
        bodies.append((rank, path, body))
        headers.append(_header_row(run_id, rank, header))
    if _HAVE_ARROW and bodies:
        counts = [len(_line_ends(np.frombuffer(b, dtype=np.uint8))) for _, _, b in bodies]
        table = _arrow_steps(b"".join(b for _, _, b in bodies), counts)
        if table is not None:
            ranks = np.repeat(np.array([r for r, _, _ in bodies], dtype="int32"), counts)
            parts = [table.append_column("rank", pa.array(ranks))]
            return None, parts, _measured_ranks(parts), headers
    parts = []
    for rank, path, body in bodies:
        steps = _parse_body(body, run_id, path, problems)
        if steps is not None:
            parts.append(_with_rank(steps, rank))
    return None, parts, _measured_ranks(parts), headers


def _typed_steps(frame: pd.DataFrame) -> pd.DataFrame:
    """STEP_FIELDS' dtypes: integers int64 (nullable Int64 where a line lacks an optional one), flags
    bool (a missing `profiled` is False), seconds float64 (NaN where not measured)."""
    for name, dtype in STEP_FIELDS.items():
        column = frame[name]
        if column.dtype == dtype:  # numpy's type already: no gaps (Arrow's reading of a column without nulls)
            continue
        if dtype == "int64":
            column = column.astype("Int64")
            frame[name] = column if column.hasnans else column.astype("int64")
        elif dtype == "bool":
            frame[name] = column.astype("boolean").fillna(False).astype(bool)
        else:
            frame[name] = column.astype("float64")
    return frame


def _steps_frame(parts: list[tuple[int, Any]], run_ids: list[str]) -> pd.DataFrame:
    """(run index, steps with a rank column) parts -> one DataFrame with a categorical run_id."""
    columns = ["run_id", "rank", *STEP_FIELDS]
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype="object" if c == "run_id" else STEP_FIELDS.get(c, "int32")) for c in columns}
        )
    if _HAVE_ARROW:
        tables = [t.append_column("run_index", pa.repeat(pa.scalar(i, pa.int32()), len(t))) for i, t in parts]
        table = pa.concat_tables(tables)
        # integers and flags with gaps go through pandas' nullable types; the others straight to numpy's
        gaps = [f.name for f in table.schema if f.type in _PANDAS_TYPES and table[f.name].null_count]
        frame = table.drop_columns(gaps).to_pandas()
        for name in gaps:
            frame[name] = table[name].to_pandas(types_mapper=_PANDAS_TYPES.get)
    else:
        records = [r for _, steps in parts for r in steps]
        frame = pd.DataFrame(
            {name: pd.Series([r[name] for r in records], dtype="object") for name in [*STEP_FIELDS, "rank"]}
        )
        frame["run_index"] = np.repeat(np.array([i for i, _ in parts], dtype="int32"), [len(s) for _, s in parts])
    frame = _typed_steps(frame)
    frame.insert(0, "run_id", pd.Categorical.from_codes(frame.pop("run_index").to_numpy(), categories=run_ids))
    frame.insert(1, "rank", frame.pop("rank").astype("int32"))
    return frame[columns]


# --- telemetry and commbench -------------------------------------------------------------------


def _telemetry_record(record: Any) -> tuple[dict | None, str | None]:
    """A telemetry sample as plain cells, or why it is none: it needs a finite t_s, and rank and gpu
    (where present) are integers >= 0, since the timeline plots over time per rank."""
    if not isinstance(record, dict):
        return None, f"a JSON {_json_type(record)}, expected a telemetry sample (an object)"
    if (t := _as_float(record.get("t_s"))) is None or not math.isfinite(t):
        return None, f"t_s {_shown(record.get('t_s'))} is not a finite number"
    for name in ("rank", "gpu"):
        if record.get(name) is not None and not _is_count(record[name]):
            return None, f"{name} {_shown(record[name])} is not an integer >= 0"
    if (problem := _shape_problem(record, "the sample")) is not None:
        return None, problem
    flat = _flatten(record, "", {})
    # NaN, infinities and numbers near a double's limit (1.8e308; a min-max band of two overflows) are no
    # measurement: empty cells, so plots and means never meet an infinity
    return {k: None if type(v) is float and not abs(v) <= MAX_MAGNITUDE else v for k, v in flat.items()}, None


def _read_telemetry(path: Path, run_id: str, problems: _Problems) -> list[dict]:
    records = []
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as error:
        problems.add(run_id, path, None, f"unreadable: {error.strerror or error}")
        return records
    bad = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record, error = _json_line(line)
        if error is None:
            record, error = _telemetry_record(record)
        if error is not None:
            problems.add(run_id, path, number, f"telemetry {error}; skipped", warn=False)
            bad += 1
            continue
        record["run_id"] = run_id  # last: a sample's own run_id key never moves it to another run
        records.append(record)
    if bad:
        warnings.warn(_text(f"{path}: skipped {bad} unreadable telemetry line(s)"), LogWarning, stacklevel=3)
    return records


def _run_telemetry(run_dir: Path, row: dict, problems: _Problems) -> list[dict]:
    """The samples of a run's telemetry*.jsonl files; none for a run of unknown size (no readable
    world_size in meta.json): its ranks are unknown, and tables rank runs by their size."""
    names = sorted(n for n in os.listdir(run_dir) if TELEMETRY.match(n))
    if names and not _is_size(row.get("world_size")):
        for name in names:
            problems.add(
                row["run_id"],
                run_dir / name,
                None,
                f"telemetry of a run without a world_size (an integer >= 1) in {META}; skipped",
            )
        return []
    return [record for name in names for record in _read_telemetry(run_dir / name, row["run_id"], problems)]


def _trace_record(obj: Any) -> tuple[dict | None, str | None]:
    """One breakdown_rank<R>.json as a row of the traces table, or why it is none."""
    if not isinstance(obj, dict):
        return None, f"a JSON {_json_type(obj)}, expected a trace breakdown (an object)"
    if (problem := _schema_problem(obj.get("schema_version"), "the breakdown")) is not None:
        return None, problem
    trace = obj.get("trace")
    if not isinstance(trace, dict):
        return None, f"trace {_shown(trace)} is not an object"
    row = {"rank": obj.get("rank"), "source": obj.get("source")}
    if not _is_count(row["rank"]) or not _is_name(row["source"]):
        return None, f"rank {_shown(row['rank'])} or source {_shown(row['source'])} is not a rank and a name"
    steps = trace.get("steps")
    if not isinstance(steps, list) or not steps or not all(_is_count(s) for s in steps):
        return None, f"steps {_shown(steps)} is not a list of step indexes"
    row.update(steps=len(steps), first_step=min(steps), last_step=max(steps))
    for name in TRACE_SECONDS:
        if not _is_seconds(value := trace.get(name)):
            return None, f"{name} {_shown(value)} is not seconds (a number >= 0)"
        row[name] = float(value)
    for name, source in (("allreduce_s", "collectives_s"), ("allreduce_exposed_s", "collectives_exposed_s")):
        per_collective = trace.get(source, {})
        value = per_collective.get("allreduce", 0.0) if isinstance(per_collective, dict) else None
        if not _is_seconds(value):
            return None, f"{source} {_shown(per_collective)} is not collective -> seconds"
        row[name] = float(value)
    if row["window_s"] <= 0:
        return None, "window_s is 0: no profiled step"
    return row, None


def _run_traces(run_dir: Path, row: dict, problems: _Problems) -> list[dict]:
    """The rows of a run's breakdown_rank<R>.json files (each rank's sampled or explicit trace window)."""
    out = []
    for name in sorted(n for n in os.listdir(run_dir) if BREAKDOWN.fullmatch(n)):
        obj, error = _read_json(run_dir / name)
        record, problem = (None, error) if error else _trace_record(obj)
        if record is not None and record["rank"] != int(BREAKDOWN.fullmatch(name).group(1)):
            record, problem = None, f"rank {record['rank']} in the file of rank {BREAKDOWN.fullmatch(name).group(1)}"
        if record is None:
            problems.add(row["run_id"], run_dir / name, None, f"{problem}; skipped")
            continue
        out.append({"run_id": row["run_id"], **record})
    return out


def _eval_record(record: Any) -> tuple[dict | None, list[str]]:
    """One eval.jsonl line as a row: every EVAL_FIELDS field a number (the counts whole and >= 0), the
    optional ones (EVAL_OPTIONAL_FIELDS) typed where present and null where absent; (None, []) when it is
    no evaluation record, else (row, the optional fields that were there but of the wrong type)."""
    if not isinstance(record, dict):
        return None, []
    row = {}
    for name, dtype in EVAL_FIELDS.items():
        value = record.get(name)
        if _as_float(value) is None or (dtype == "int64" and not _is_whole(value)):
            return None, []
        row[name] = int(value) if dtype == "int64" else float(value)
    ignored = []
    for name, dtype in EVAL_OPTIONAL_FIELDS.items():
        value, expected = (
            (None, None) if record.get(name) is None else _checked(record[name], EVAL_OPTIONAL_KINDS[dtype])
        )
        if expected:
            ignored.append(f"{name} {_shown(record[name])} is not {expected}")
        row[name] = value
    return row, ignored


def _is_whole(value: Any) -> bool:
    """A count as JSON may carry it: an integer >= 0, or a float that is one (3.0)."""
    return _is_count(value) or (type(value) is float and value.is_integer() and 0 <= value <= INT64_MAX)


def _run_evals(run_dir: Path, row: dict, problems: _Problems) -> list[dict]:
    """The evaluations of a run (eval.jsonl, benchmarks/evaluate.py), typed; a bad line is a problem, skipped;
    an optional field of the wrong type is a problem, null."""
    path = run_dir / EVAL_FILE
    if not path.is_file():
        return []
    out = []
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except OSError as error:
        problems.add(row["run_id"], path, None, f"unreadable: {error.strerror or error}")
        return []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parsed, _ = _json_line(line.encode())
        record, ignored = _eval_record(parsed)
        if record is None:
            problems.add(row["run_id"], path, number, f"not an evaluation record ({', '.join(EVAL_FIELDS)}); skipped")
            continue
        for problem in ignored:
            problems.add(row["run_id"], path, number, f"{problem}; ignored")
        out.append({"run_id": row["run_id"], **record})
    return out


def _evals_frame(rows: list[dict]) -> pd.DataFrame:
    """The evals table with EVAL_FIELDS' dtypes (counts int64, the rest float64) and the optional fields
    nullable (Int64, float64 NaN)."""
    frame = pd.DataFrame(rows, columns=EVAL_COLUMNS)
    frame["run_id"] = frame["run_id"].astype("object")
    for name, dtype in EVAL_FIELDS.items():
        frame[name] = frame[name].astype(dtype)
    for name, dtype in EVAL_OPTIONAL_FIELDS.items():
        frame[name] = frame[name].astype("Int64" if dtype == "int64" else "float64")
    return frame


RANK_COLUMNS = ["run_id", "rank", "host", "local_rank"]


def _ranks_frame(rows: list[dict]) -> pd.DataFrame:
    """The ranks table: one row per rank log read (RANK_COLUMNS); host null where the header has none."""
    frame = pd.DataFrame(rows, columns=RANK_COLUMNS)
    return frame.astype({"run_id": "object", "rank": "int64", "host": "object", "local_rank": "Int64"})


def _commbench_record(record: Any) -> tuple[dict | None, str | None]:
    """A measurement with its seven fields typed (COMMBENCH_KINDS), the suite's where present
    (COMMBENCH_OPTIONAL_KINDS), any others as plain cells; or why it is none."""
    if not isinstance(record, dict):
        return None, f"a JSON {_json_type(record)}, expected a measurement (an object)"
    clean = _flatten(record, "", {})
    for name, kind in COMMBENCH_KINDS.items():
        clean[name], expected = _checked(record.get(name), kind)
        if expected:
            return None, f"{name} {_shown(record.get(name))} is not {expected}"
    for name, kind in COMMBENCH_OPTIONAL_KINDS.items():
        if record.get(name) is None:
            clean[name] = None
            continue
        clean[name], expected = _checked(record[name], kind)
        if expected:
            return None, f"{name} {_shown(record[name])} is not {expected}"
    return clean, None


def _read_commbench(path: Path, root: Path, problems: _Problems) -> list[dict]:
    source = _text(path.relative_to(root).as_posix() if path != root else path.name)
    obj, error = _read_json(path)
    if isinstance(obj, dict):  # tolerate {"results": [...], ...} wrappers
        obj = obj.get("results", obj.get("measurements"))
    if not isinstance(obj, list):
        problems.add(source, path, None, error or "commbench file is not a list of measurements; skipped")
        return []
    records = []
    for index, record in enumerate(obj):
        clean, problem = _commbench_record(record)
        if problem is not None:
            problems.add(source, path, None, f"measurement {index}: {problem}; skipped")
            continue
        clean["source"] = source  # last: a measurement's own `source` key never hides where it was read
        records.append(clean)
    return records


# --- the entry points --------------------------------------------------------------------------


def _no_measured_step(row: dict, rank_files: dict[int, Path], parts: list, measured: set[int]) -> str | None:
    """Why a completed run's logs do not count: no step at all, or a rank without a measured step."""
    if not parts:
        return "the rank logs hold no readable step"
    idle = [r for r in sorted(rank_files) if r not in measured]
    if idle:
        shown = ", ".join(rank_files[r].name for r in idle[:3]) + (" ..." if len(idle) > 3 else "")
        return f"{shown} hold(s) no measured step (warm-up or profiled only, or every step line was skipped)"
    return None


def load_campaign(root: Path, *, steps_of_all_runs: bool = False) -> Campaign:
    """Read every run below root. Steps are read for completed runs only (they are the ones that count),
    or for every run with a usable header when `steps_of_all_runs`."""
    root = Path(root)
    problems = _Problems()
    rows: list[dict] = []
    parts: list[tuple[int, Any]] = []
    telemetry: list[dict] = []
    run_ids: list[str] = []
    to_read: list[tuple[int, dict, dict[int, Path], Future]] = []
    headers: list[dict] = []
    log_problems = _Problems()  # listed after the run directories' problems, wherever the threads are
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for run_dir in find_run_dirs(root):
            row, rank_files = _run_row(run_dir, root, problems)
            if row["status"] == "completed" or (steps_of_all_runs and row["status"] != "unsupported"):
                # the pool's threads parse the rank logs (Arrow and numpy let go of the GIL) while this one
                # reads the next run directories and the telemetry, which is Python's json
                future = pool.submit(_read_run_logs, row["run_id"], rank_files, log_problems)
                to_read.append((len(rows), row, rank_files, future))
            rows.append(row)
            run_ids.append(row["run_id"])
            telemetry += _run_telemetry(run_dir, row, problems)
        for run_index, row, rank_files, future in to_read:
            update, run_parts, measured, run_headers = future.result()
            if update is not None:
                row.update(update)
            elif row["status"] == "completed" and (reason := _no_measured_step(row, rank_files, run_parts, measured)):
                row.update(status="incomplete", reason=reason)
            parts += [(run_index, t) for t in run_parts]
            headers += run_headers
    problems.rows += log_problems.rows
    runs = _tidy_runs(rows)
    # a run demoted while its logs were read must not keep steps
    bad = set(runs.loc[runs["status"] != "completed", "run_id"]) if not steps_of_all_runs else set()
    parts = [p for p in parts if run_ids[p[0]] not in bad]
    traces = [
        t
        for row in rows
        if row["status"] == "completed" and row["run_id"] not in bad
        for t in _run_traces(Path(row["run_dir"]), row, problems)
    ]
    evals = [
        e
        for row in rows
        if row["status"] == "completed" and row["run_id"] not in bad
        for e in _run_evals(Path(row["run_dir"]), row, problems)
    ]
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
    for column, dtype in COMMBENCH_OPTIONAL_DTYPES.items():
        commbench_frame[column] = (
            commbench_frame[column]
            if column in commbench_frame
            else pd.Series(None, index=commbench_frame.index, dtype="object")
        ).astype(dtype)
    return Campaign(
        root=root,
        runs=runs,
        steps=_steps_frame(parts, run_ids),
        telemetry=pd.DataFrame(telemetry),
        commbench=commbench_frame,
        problems=problems.frame(),
        traces=pd.DataFrame(traces, columns=TRACE_COLUMNS),
        evals=_evals_frame(evals),
        ranks=_ranks_frame([h for h in headers if h["run_id"] not in bad]),
    )


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


INT_COLUMNS = (
    "world_size",
    "num_nodes",
    "per_gpu_batch",
    "global_batch",
    "repeat",
    "measured_steps",
    "measured_samples",
    "warmup_steps",
    "schema_version",
    "num_processes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "samples_to_target",
    "steps_to_target",
)
# flags a run may lack (older summaries, runs without a target): nullable booleans
BOOL_COLUMNS = ("target_reached",)


def _tidy_runs(rows: list[dict]) -> pd.DataFrame:
    """Rows -> the runs table; counts are nullable integers (Int64), whichever runs lack them."""
    runs = pd.DataFrame(rows)
    if runs.empty:
        return pd.DataFrame(columns=["run_id", "run_dir", "cell", "status", "reason"])
    runs["reason"] = [_one_line(r) if isinstance(r, str) else None for r in runs["reason"]]
    for column in INT_COLUMNS:
        if column in runs:
            # from the rows, not the frame: pandas turns a column of ints and Nones into floats
            runs[column] = pd.array([v if _is_count(v := row.get(column)) else None for row in rows], dtype="Int64")
    for column in BOOL_COLUMNS:
        if column in runs:
            runs[column] = pd.array([v if _is_flag(v := row.get(column)) else None for row in rows], dtype="boolean")
    return runs


def _parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns Arrow cannot store as they are (an int in one run and a string in another, an
    integer beyond int64) become text."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column].dropna()}
            if len(kinds) > 1 or not _arrow_takes(frame[column]):
                frame[column] = frame[column].map(lambda v: None if v is None or v != v else _text(str(v)))
    return frame


def _arrow_takes(column: pd.Series) -> bool:
    try:
        pa.array(column, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return False
    return True


def export_parquet(campaign: Campaign, out: Path) -> list[Path]:
    """Write runs/steps/telemetry/commbench/problems/traces as Parquet files in out (a new or empty folder)."""
    from benchmarks.errors import ConfigError

    if not _HAVE_ARROW:
        raise ConfigError("--parquet needs the pyarrow package; run 'pip install pyarrow' in the ddlbench environment")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--parquet {out} is not empty (never overwritten); pass a new folder")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("runs", "steps", "telemetry", "commbench", "problems", "traces"):
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
