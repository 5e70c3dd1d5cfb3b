"""rank<R>.jsonl -> the steps table: a header line, then one line per step, checked field by field against
run_files.STEP_FIELDS (Arrow's multi-threaded JSON-lines reader where pyarrow is installed, a line-by-line
parser that names bad lines otherwise), and the ranks table (each rank log's host and local rank).
"""

from __future__ import annotations

import io
import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.load.values import (
    BOM,
    STEP_KINDS,
    LogWarning,
    Problems,
    checked,
    is_count,
    is_text,
    json_type,
    quoted,
    schema_problem,
    valid_text,
)
from benchmarks.rundir import run_files

try:  # the fast path: Arrow's multi-threaded JSON-lines reader (pure Python fallback below)
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pa_json
except ImportError:  # pragma: no cover - exercised by monkeypatching HAVE_ARROW
    pa = pc = pa_json = None


RANK_LOG = re.compile(r"rank(\d+)\.jsonl$")


# the per-step record written by benchmarks/loop.py (schema_version 1)
STEP_FIELDS, REQUIRED_STEP_FIELDS = run_files.STEP_FIELDS, run_files.REQUIRED_STEP_FIELDS


HAVE_ARROW = pa is not None


# a run directory with neither a summary nor a rank log: rank 0 wrote config.yaml (and meta.json), then the
# launch died (or is still starting); the cause is in what the launcher printed, not in the directory
NO_STEP_RECORDS = (
    "no step records: the launch died before its first step (or is still starting); see the launcher's output"
)


def json_line(line: bytes) -> tuple[Any, str | None]:
    """One log line's JSON (invalid UTF-8 replaced: Arrow ignores it in the fields nobody reads), or why not."""
    try:
        return json.loads(line.decode("utf-8", "replace")), None
    except json.JSONDecodeError as error:
        return None, f"corrupt line ({error.msg})"
    except ValueError as error:  # an integer of more than 4300 digits
        return None, f"corrupt line ({error})"
    except RecursionError:
        return None, "corrupt line (nested too deeply)"


# a value the training itself produced, which may be NaN or infinite where it diverged (fp16 overflow): the
# step was run and timed all the same, so it is kept, with this field null and the divergence named
DIVERGING_FIELDS = ("loss",)


def diverged(record: Any) -> str | None:
    """'loss nan' where a step record's DIVERGING_FIELDS hold a non-finite number, else None."""
    if not isinstance(record, dict):
        return None
    for name in DIVERGING_FIELDS:
        value = record.get(name)
        if type(value) is float and not math.isfinite(value):
            return f"{name} {value}"
    return None


def _step_record(record: Any) -> tuple[dict | None, str | None]:
    """A step line's record with exactly STEP_FIELDS (floats as floats, absent as None), or why it is none."""
    if not isinstance(record, dict):
        return None, f"a JSON {json_type(record)}, expected a step record (an object)"
    missing = [f for f in REQUIRED_STEP_FIELDS if record.get(f) is None]
    if missing:
        return None, f"step record without {', '.join(missing)}"
    clean = {}
    for name, dtype in STEP_FIELDS.items():
        value = record.get(name)
        if name in DIVERGING_FIELDS and type(value) is float and not math.isfinite(value):
            value = None  # the training diverged; the step's times stand (diverged() names it)
        if value is not None:
            value, expected = checked(value, STEP_KINDS[dtype])
            if expected:
                return None, f"{name} {quoted(record[name])} is not {expected}"
        clean[name] = value
    return clean, None


def _parse_lines_python(body: bytes, first_line: int, run_id: str, path: Path, problems: Problems) -> list[dict]:
    """Step lines one by one: every line that is no valid step record, or repeats a step, is skipped and named."""
    records: list[dict] = []
    bad: list[str] = []
    divergent: list[str] = []
    seen: set[int] = set()
    lines = body.removeprefix(BOM).split(b"\n")  # Arrow reads a byte-order mark at the start, so this does too
    for index, line in enumerate(lines):
        number = first_line + index
        if not line.strip():
            continue
        raw, error = json_line(line)
        record = raw
        if error is None:
            record, error = _step_record(raw)
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
        if (what := diverged(raw)) is not None:
            divergent.append(f"step {record['step']}")
            problems.add(
                run_id,
                path,
                number,
                f"{what}: the training diverged; the step is kept, its {what.split()[0]} null",
                warn=False,
            )
    if divergent:
        warnings.warn(
            valid_text(
                f"{path}: the training diverged (loss not finite) at {len(divergent)} step(s) from {divergent[0]}; "
                "their times are counted, as the run's summary counts them"
            ),
            LogWarning,
            stacklevel=4,
        )
    if bad:
        warnings.warn(
            valid_text(f"{path}: skipped {len(bad)} unreadable line(s): {'; '.join(bad[:3])}"), LogWarning, stacklevel=4
        )
    return records


if HAVE_ARROW:
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


def _split_header(data: bytes, run_id: str, path: Path, problems: Problems) -> tuple[dict | None, bytes]:
    newline = data.find(b"\n")
    head, body = (data, b"") if newline < 0 else (data[:newline], data[newline + 1 :])
    header, _ = json_line(head.removeprefix(BOM))
    if not isinstance(header, dict) or header.get("kind") != "header":
        problems.add(run_id, path, 1, "no header line (kind=header, schema_version)")
        return None, body
    return header, body


def _parse_body(body: bytes, run_id: str, path: Path, problems: Problems):
    """One rank's step lines -> an Arrow table (or a list of records without pyarrow); None when no step is readable."""
    if not body.strip():
        return None
    if HAVE_ARROW:
        table = _arrow_steps(body, [body.count(b"\n")])
        if table is not None:
            return table
        records = _parse_lines_python(body, 2, run_id, path, problems)
        return pa.Table.from_pylist(records, schema=_STEP_SCHEMA) if records else None
    return _parse_lines_python(body, 2, run_id, path, problems) or None


def _with_rank(steps, rank: int):
    if HAVE_ARROW:
        return steps.append_column("rank", pa.repeat(pa.scalar(rank, pa.int32()), len(steps)))
    return [{**r, "rank": rank} for r in steps]


def _measured_ranks(parts: list) -> set[int]:
    """The ranks with at least one measured step (not warm-up, not profiled: summary_schema.is_measured)."""
    ranks: set[int] = set()
    for steps in parts:
        if HAVE_ARROW:
            measured = pc.and_not(pc.invert(steps["warmup"]), pc.fill_null(steps["profiled"], False))
            ranks.update(pc.unique(pc.filter(steps["rank"], measured)).to_pylist())
        else:
            ranks.update(r["rank"] for r in steps if not r["warmup"] and not r["profiled"])
    return ranks


def _header_row(run_id: str, rank: int, header: dict) -> dict:
    """A rank's place from its log's header line (launchers/lifecycle/rank.py _header): its host (None where the header
    has no host name), local rank and node (None where the header predates it)."""
    host, local, node = header.get("host"), header.get("local_rank"), header.get("node")
    return {
        "run_id": run_id,
        "rank": rank,
        "host": valid_text(host) if is_text(host) and host.strip() else None,
        "local_rank": local if is_count(local) else None,
        "node": node if is_count(node) else None,
    }


def read_run_logs(
    run_id: str, rank_files: dict[int, Path], problems: Problems
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
        if (problem := schema_problem(header.get("schema_version"), path.name)) is not None:
            return {"status": "unsupported", "reason": problem}, [], set(), []
        bodies.append((rank, path, body))
        headers.append(_header_row(run_id, rank, header))
    if HAVE_ARROW and bodies:
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


def steps_frame(parts: list[tuple[int, Any]], run_ids: list[str]) -> pd.DataFrame:
    """(run index, steps with a rank column) parts -> one DataFrame with a categorical run_id."""
    columns = ["run_id", "rank", *STEP_FIELDS]
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype="object" if c == "run_id" else STEP_FIELDS.get(c, "int32")) for c in columns}
        )
    if HAVE_ARROW:
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


RANK_COLUMNS = ["run_id", "rank", "host", "local_rank", "node"]


def ranks_frame(rows: list[dict]) -> pd.DataFrame:
    """The ranks table: one row per rank log read (RANK_COLUMNS); host null where the header has none."""
    frame = pd.DataFrame(rows, columns=RANK_COLUMNS)
    return frame.astype({"run_id": "object", "rank": "int64", "host": "object", "local_rank": "Int64", "node": "Int64"})
