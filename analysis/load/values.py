"""What a field of a run's files must be, and plain scalars for table cells: the checks each value passes
(counts, sizes, seconds, fractions, names), JSON read within limits, and the problems list (every skipped
line, file or field, each also a LogWarning).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

# documents nested deeper or holding more values than this are no file ddlbench writes (YAML
# aliases can make both, even a cycle, from a few bytes)
SUPPORTED_SCHEMA_VERSIONS = frozenset({1})  # what a run file's schema_version may be
MAX_NESTING = 32


MAX_VALUES = 100_000


INT64_MAX = 2**63 - 1


MAX_MAGNITUDE = 1e300  # a telemetry value beyond this is none: no counter or rate comes near it


BOM = b"\xef\xbb\xbf"


class LogWarning(UserWarning):
    """A log line, file or field was skipped (corrupt, truncated, wrong type, unknown schema)."""


def one_line(text: str) -> str:
    """Reasons and problems are one line of valid UTF-8 (YAML errors span lines; JSON may hold lone surrogates)."""
    return valid_text(" ".join(str(text).split()))


class Problems:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, run_id: str, path: Path | str, line: int | None, problem: str, *, warn: bool = True) -> None:
        problem = one_line(problem)
        self.rows.append({"run_id": run_id, "file": valid_text(str(path)), "line": line, "problem": problem})
        if warn:
            where = f"{path}:{line}" if line else str(path)
            warnings.warn(valid_text(f"{where}: {problem}"), LogWarning, stacklevel=3)

    def frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows, columns=["run_id", "file", "line", "problem"])
        frame["line"] = frame["line"].astype("Int64")
        return frame


def valid_text(value: str) -> str:
    """Valid UTF-8 text: a lone surrogate (JSON's "\\ud800", an odd file name) becomes a backslash escape."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def quoted(value: Any) -> str:
    """A value as a reason quotes it: its repr, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def as_float(value: Any) -> float | None:
    """A JSON/YAML number as a float; None for anything else (true/false, text, an int beyond a double)."""
    if type(value) not in (int, float):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= INT64_MAX


def is_size(value: Any) -> bool:
    return type(value) is int and 1 <= value <= INT64_MAX


def is_seconds(value: Any) -> bool:
    number = as_float(value)
    return number is not None and math.isfinite(number) and number >= 0


def _is_number(value: Any) -> bool:
    return as_float(value) is not None


def _is_fraction(value: Any) -> bool:
    number = as_float(value)
    return number is not None and 0.0 <= number <= 1.0


def is_flag(value: Any) -> bool:
    return type(value) is bool


def is_text(value: Any) -> bool:
    return type(value) is str


def _is_counts(value: Any) -> bool:
    # a per-rank list (summary.json's *_by_rank): integers >= 0, or null where a rank measured none
    return type(value) is list and len(value) <= MAX_VALUES and all(v is None or is_count(v) for v in value)


def _is_numbers(value: Any) -> bool:
    # a per-node list of seconds (summary.json's staging_s_by_node): finite numbers >= 0, or null
    return type(value) is list and len(value) <= MAX_VALUES and all(v is None or is_seconds(v) for v in value)


def is_name(value: Any) -> bool:
    # a name Hydra may have written as a number (run.campaign=2026) is that number's text
    return (type(value) is str and value.strip() != "") or is_count(value)


# kind -> (check, what was expected, the value as its column holds it)
KINDS: dict[str, tuple[Callable[[Any], bool], str, Callable[[Any], Any]]] = {
    "count": (is_count, "an integer >= 0", int),
    "size": (is_size, "an integer >= 1", int),
    "seconds": (is_seconds, "a finite number >= 0", float),
    "number": (_is_number, "a number", float),
    "fraction": (_is_fraction, "a fraction in [0, 1]", float),
    "flag": (is_flag, "true or false", bool),
    "text": (is_text, "a string", valid_text),
    "name": (is_name, "a non-empty string", lambda v: valid_text(str(v))),
    "counts": (_is_counts, "a list of integers >= 0 or null", lambda v: _json_text(v)),
    "numbers": (_is_numbers, "a list of numbers >= 0 or null", lambda v: _json_text(v)),
    "record": (lambda v: type(v) is dict, "a JSON object", lambda v: _json_text(v)),
}


STEP_KINDS = {"int64": "count", "bool": "flag", "float64": "seconds"}


def checked(value: Any, kind: str) -> tuple[Any, str | None]:
    """(value as its column holds it, None), or (None, 'what was expected') when it is not of the kind."""
    check, expected, convert = KINDS[kind]
    return (convert(value), None) if check(value) else (None, expected)


def scalar(value: Any) -> Any:
    """A plain table cell: None, bool, str (valid UTF-8), an int64 or a float; other values as text."""
    if value is None or type(value) in (bool, float):
        return value
    if type(value) is str:
        return valid_text(value)
    if type(value) is int:
        return value if -INT64_MAX - 1 <= value <= INT64_MAX else str(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _json_text(value)
    return valid_text(str(value))  # a YAML date, binary, ...


def _json_text(value: Any) -> str:
    """A list as JSON text (a table cell stays a scalar, Parquet-safe); str() where JSON cannot say it."""
    try:
        return valid_text(json.dumps(value, default=str))
    except (TypeError, ValueError):  # keys JSON has no form for (a YAML date), a cycle
        return valid_text(str(value))


def shape_problem(obj: Any, name: str) -> str | None:
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


def json_type(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "true/false", type(None): "null"}.get(
        type(value), "number"
    )


def flatten(obj: dict, prefix: str, out: dict, skip: set[str] = frozenset()) -> dict:
    """Nested dicts -> dotted keys; lists become JSON text so every cell is a plain scalar (Parquet-safe).
    Callers check the document's shape first (shape_problem), so the recursion is shallow."""
    for key, value in obj.items():
        name = f"{prefix}{valid_text(str(key))}"
        if name.split(".", 1)[-1] in skip:
            continue
        if isinstance(value, dict):
            flatten(value, f"{name}.", out, skip)
        else:
            out[name] = scalar(value)
    return out


def read_json(path: Path) -> tuple[Any, str | None]:
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
    problem = shape_problem(obj, path.name)
    return (None, problem) if problem else (obj, None)


def schema_problem(version: Any, where: str) -> str | None:
    if is_count(version) and version in SUPPORTED_SCHEMA_VERSIONS:
        return None
    allowed = ", ".join(map(str, sorted(SUPPORTED_SCHEMA_VERSIONS)))
    return (
        f"schema_version {quoted(version)} in {where} is not supported (this ddlbench reads {allowed}); "
        f"analyse it with the ddlbench version that wrote it"
    )
