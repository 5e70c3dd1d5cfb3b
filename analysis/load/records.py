"""A run's other files -> their tables: telemetry*.jsonl (NVML/psutil samples), breakdown_rank<R>.json (the
trace window's seconds by class), eval.jsonl (evaluations) and commbench*.json (measurements).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.load.ranklogs import json_line
from analysis.load.values import (
    INT64_MAX,
    MAX_MAGNITUDE,
    LogWarning,
    Problems,
    as_float,
    checked,
    flatten,
    is_count,
    is_name,
    is_seconds,
    is_size,
    json_type,
    quoted,
    read_json,
    schema_problem,
    shape_problem,
    valid_text,
)
from benchmarks.rundir import run_files
from benchmarks.rundir.run_files import EVAL_FIELDS, EVAL_FILE, EVAL_OPTIONAL_FIELDS
from benchmarks.tracereduce import TraceBreakdown

TELEMETRY = re.compile(r"telemetry.*\.jsonl$")


COMMBENCH = re.compile(r"commbench.*\.json$")


BREAKDOWN = re.compile(r"breakdown_rank(\d+)\.json$")  # benchmarks/tracereduce.py breakdown_path


COMMBENCH_FIELDS = ["op", "size_bytes", "algbw_gb_s", "busbw_gb_s", "time_s", "world_size", "backend"]


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


def _telemetry_record(record: Any) -> tuple[dict | None, str | None]:
    """A telemetry sample as plain cells, or why it is none: it needs a finite t_s, and rank and gpu
    (where present) are integers >= 0, since the timeline plots over time per rank."""
    if not isinstance(record, dict):
        return None, f"a JSON {json_type(record)}, expected a telemetry sample (an object)"
    if (t := as_float(record.get("t_s"))) is None or not math.isfinite(t):
        return None, f"t_s {quoted(record.get('t_s'))} is not a finite number"
    for name in ("rank", "gpu"):
        if record.get(name) is not None and not is_count(record[name]):
            return None, f"{name} {quoted(record[name])} is not an integer >= 0"
    if (problem := shape_problem(record, "the sample")) is not None:
        return None, problem
    flat = flatten(record, "", {})
    # NaN, infinities and numbers near a double's limit (1.8e308; a min-max band of two overflows) are no
    # measurement: empty cells, so plots and means never meet an infinity
    return {k: None if type(v) is float and not abs(v) <= MAX_MAGNITUDE else v for k, v in flat.items()}, None


def _read_telemetry(path: Path, run_id: str, problems: Problems) -> list[dict]:
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
        record, error = json_line(line)
        if error is None:
            record, error = _telemetry_record(record)
        if error is not None:
            problems.add(run_id, path, number, f"telemetry {error}; skipped", warn=False)
            bad += 1
            continue
        record["run_id"] = run_id  # last: a sample's own run_id key never moves it to another run
        records.append(record)
    if bad:
        warnings.warn(valid_text(f"{path}: skipped {bad} unreadable telemetry line(s)"), LogWarning, stacklevel=3)
    return records


def run_telemetry(run_dir: Path, row: dict, problems: Problems) -> list[dict]:
    """The samples of a run's telemetry*.jsonl files; none for a run of unknown size (no readable
    world_size in meta.json): its ranks are unknown, and tables rank runs by their size."""
    names = sorted(n for n in os.listdir(run_dir) if TELEMETRY.match(n))
    if names and not is_size(row.get("world_size")):
        for name in names:
            problems.add(
                row["run_id"],
                run_dir / name,
                None,
                f"telemetry of a run without a world_size (an integer >= 1) in {run_files.META}; skipped",
            )
        return []
    return [record for name in names for record in _read_telemetry(run_dir / name, row["run_id"], problems)]


def _trace_record(obj: Any) -> tuple[dict | None, str | None]:
    """One breakdown_rank<R>.json as a row of the traces table, or why it is none."""
    if not isinstance(obj, dict):
        return None, f"a JSON {json_type(obj)}, expected a trace breakdown (an object)"
    if (problem := schema_problem(obj.get("schema_version"), "the breakdown")) is not None:
        return None, problem
    trace = obj.get("trace")
    if not isinstance(trace, dict):
        return None, f"trace {quoted(trace)} is not an object"
    row = {"rank": obj.get("rank"), "source": obj.get("source")}
    if not is_count(row["rank"]) or not is_name(row["source"]):
        return None, f"rank {quoted(row['rank'])} or source {quoted(row['source'])} is not a rank and a name"
    steps = trace.get("steps")
    if not isinstance(steps, list) or not steps or not all(is_count(s) for s in steps):
        return None, f"steps {quoted(steps)} is not a list of step indexes"
    row.update(steps=len(steps), first_step=min(steps), last_step=max(steps))
    for name in TRACE_SECONDS:
        if not is_seconds(value := trace.get(name)):
            return None, f"{name} {quoted(value)} is not seconds (a number >= 0)"
        row[name] = float(value)
    for name, source in (("allreduce_s", "collectives_s"), ("allreduce_exposed_s", "collectives_exposed_s")):
        per_collective = trace.get(source, {})
        value = per_collective.get("allreduce", 0.0) if isinstance(per_collective, dict) else None
        if not is_seconds(value):
            return None, f"{source} {quoted(per_collective)} is not collective -> seconds"
        row[name] = float(value)
    if row["window_s"] <= 0:
        return None, "window_s is 0: no profiled step"
    return row, None


def run_traces(run_dir: Path, row: dict, problems: Problems) -> list[dict]:
    """The rows of a run's breakdown_rank<R>.json files (each rank's sampled or explicit trace window)."""
    out = []
    for name in sorted(n for n in os.listdir(run_dir) if BREAKDOWN.fullmatch(n)):
        obj, error = read_json(run_dir / name)
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
        if as_float(value) is None or (dtype == "int64" and not _is_whole(value)):
            return None, []
        row[name] = int(value) if dtype == "int64" else float(value)
    ignored = []
    for name, dtype in EVAL_OPTIONAL_FIELDS.items():
        value, expected = (
            (None, None) if record.get(name) is None else checked(record[name], EVAL_OPTIONAL_KINDS[dtype])
        )
        if expected:
            ignored.append(f"{name} {quoted(record[name])} is not {expected}")
        row[name] = value
    return row, ignored


def _is_whole(value: Any) -> bool:
    """A count as JSON may carry it: an integer >= 0, or a float that is one (3.0)."""
    return is_count(value) or (type(value) is float and value.is_integer() and 0 <= value <= INT64_MAX)


def run_evals(run_dir: Path, row: dict, problems: Problems) -> list[dict]:
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
        parsed, _ = json_line(line.encode())
        record, ignored = _eval_record(parsed)
        if record is None:
            problems.add(row["run_id"], path, number, f"not an evaluation record ({', '.join(EVAL_FIELDS)}); skipped")
            continue
        for problem in ignored:
            problems.add(row["run_id"], path, number, f"{problem}; ignored")
        out.append({"run_id": row["run_id"], **record})
    return out


def evals_frame(rows: list[dict]) -> pd.DataFrame:
    """The evals table with EVAL_FIELDS' dtypes (counts int64, the rest float64) and the optional fields
    nullable (Int64, float64 NaN)."""
    frame = pd.DataFrame(rows, columns=EVAL_COLUMNS)
    frame["run_id"] = frame["run_id"].astype("object")
    for name, dtype in EVAL_FIELDS.items():
        frame[name] = frame[name].astype(dtype)
    for name, dtype in EVAL_OPTIONAL_FIELDS.items():
        frame[name] = frame[name].astype("Int64" if dtype == "int64" else "float64")
    return frame


def _commbench_record(record: Any) -> tuple[dict | None, str | None]:
    """A measurement with its seven fields typed (COMMBENCH_KINDS), the suite's where present
    (COMMBENCH_OPTIONAL_KINDS), any others as plain cells; or why it is none."""
    if not isinstance(record, dict):
        return None, f"a JSON {json_type(record)}, expected a measurement (an object)"
    clean = flatten(record, "", {})
    for name, kind in COMMBENCH_KINDS.items():
        clean[name], expected = checked(record.get(name), kind)
        if expected:
            return None, f"{name} {quoted(record.get(name))} is not {expected}"
    for name, kind in COMMBENCH_OPTIONAL_KINDS.items():
        if record.get(name) is None:
            clean[name] = None
            continue
        clean[name], expected = checked(record[name], kind)
        if expected:
            return None, f"{name} {quoted(record[name])} is not {expected}"
    return clean, None


def read_commbench(path: Path, root: Path, problems: Problems) -> list[dict]:
    source = valid_text(path.relative_to(root).as_posix() if path != root else path.name)
    obj, error = read_json(path)
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
