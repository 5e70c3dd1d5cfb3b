"""The run directory's files and their record formats: names, the per-step record (STEP_FIELDS), the evaluation
and progress records, reading them, writing JSON atomically, and the disk reserve that keeps room for the
summary. Torch-free."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1

SUMMARY = "summary.json"

META = "meta.json"

CONFIG = "config.yaml"

# the per-step record of rank<R>.jsonl (after a header line {"kind": "header", "schema_version", ...}):
# field -> type. warmup and profiled steps are logged but not measured.
STEP_FIELDS: dict[str, str] = {
    "step": "int64",
    "epoch": "int64",
    "step_in_epoch": "int64",
    "samples": "int64",
    "warmup": "bool",
    "profiled": "bool",
    "comm_s": "float64",
    "comm_exposed_s": "float64",
    "data_s": "float64",
    "fwd_s": "float64",
    "bwd_s": "float64",
    "opt_s": "float64",
    "step_s": "float64",
    "host_data_s": "float64",
    "host_step_s": "float64",
    "loss": "float64",  # the step's training loss (read once the step is done: no extra wait)
    "lr": "float64",  # the learning rate the step ran with (optim.schedule)
}

REQUIRED_STEP_FIELDS = ("step", "samples", "warmup", "step_s")

# eval.jsonl (benchmarks/evaluate.py, rank 0): one line per evaluation of the validation set
EVAL_FILE = "eval.jsonl"

EVAL_FIELDS: dict[str, str] = {
    "step": "int64",
    "epoch": "int64",
    "samples": "int64",
    "top1": "float64",
    "top5": "float64",
    "loss": "float64",
    "eval_s": "float64",
}

# written since evaluations carry the training progress (older eval.jsonl files lack them): the global
# training samples before the evaluation, seconds since the first training step (MLPerf's clock), and the
# epochs done (steps / steps per epoch: 2.5 is half-way through the third); `epoch` is the 0-based epoch
# of the last step before it
EVAL_OPTIONAL_FIELDS: dict[str, str] = {"train_samples": "int64", "train_s": "float64", "epochs": "float64"}

# mllog.txt (benchmarks/mllog.py, rank 0): MLPerf-style :::MLLOG events
MLLOG_FILE = "mllog.txt"

# progress_rank<R>.json (launchers/lifecycle/watchdog.py): the rank's step and phase, rewritten in place every few
# seconds while it runs; stacks_rank<R>.txt: its Python stacks, dumped when the run hung (read by people)
PROGRESS_FIELDS: dict[str, str] = {
    "rank": "int64",
    "host": "str",
    "pid": "int64",
    "step": "int64",  # the step the rank is in (0-based; the steps before it are done)
    "phase": "str",  # launchers/lifecycle/watchdog.py PHASES
    "beat": "float64",  # when the rank last wrote the file (time.time())
    "since": "float64",  # when it entered this step and phase (time.time())
    "limit_s": "float64",  # the hang limit in force then
    "beat_every_s": "float64",  # how often the rank rewrites the file
    "hung": "bool",  # the rank saw no progress within limit_s
    "ended": "bool",  # the rank's watchdog stopped (the rank is ending): no more beats follow
}


def read_summary(path: Path) -> dict | None:
    """summary.json of a run directory, or None when there is none or it is unreadable."""
    try:
        summary = json.loads((path / SUMMARY).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def now_iso() -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def progress_path(run_dir: Path, rank: int) -> Path:
    """progress_rank<R>.json: rank R's step and phase while it runs (PROGRESS_FIELDS)."""
    return Path(run_dir) / f"progress_rank{rank}.json"


def stacks_path(run_dir: Path, rank: int) -> Path:
    """stacks_rank<R>.txt: rank R's Python stacks, dumped when the run hung."""
    return Path(run_dir) / f"stacks_rank{rank}.txt"


def read_progress(run_dir: Path) -> dict[int, dict]:
    """{rank: its progress record} of the ranks that wrote one (a torn or unreadable file is left out)."""
    out = {}
    for path in Path(run_dir).glob("progress_rank*.json"):
        if (m := re.fullmatch(r"progress_rank(\d+)\.json", path.name)) is None:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(record, dict):
            out[int(m.group(1))] = record
    return dict(sorted(out.items()))


def read_step_records(path: Path) -> list[dict]:
    """The step records of one rank log (header and unreadable lines skipped)."""
    records = []
    with open(path, "rb") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and record.get("kind") != "header"
                and all(record.get(k) is not None for k in REQUIRED_STEP_FIELDS)
            ):
                records.append(record)
    return records


# <run dir>/.reserve: space taken before the run starts (reserve_space) and given back for its summary.json
# when the disk filled up meanwhile, so that a run that died of a full disk still says so
RESERVE = ".reserve"

RESERVE_BYTES = 256 * 1024


def reserve_space(run_dir: Path, nbytes: int = RESERVE_BYTES) -> None:
    """Make the run directory and RESERVE in it, nbytes of real blocks (zeros written, not a sparse file);
    OSError when the disk has no room for them (the run should not start)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RESERVE
    try:
        with open(path, "wb") as f:
            f.write(bytes(nbytes))
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        path.unlink(missing_ok=True)
        raise


def release_reserve(run_dir: Path) -> bool:
    """Give RESERVE's space back; whether there was one."""
    try:
        (run_dir / RESERVE).unlink()
    except FileNotFoundError:
        return False
    return True


def _write_then_rename(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written temporary behind
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see half a file. A
    summary.json that meets a full disk gets the run's reserved space (reserve_space) and is tried once more;
    once a summary is written, the reserve is given back."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"
    try:
        _write_then_rename(path, text)
    except OSError as error:
        if path.name != SUMMARY or error.errno != errno.ENOSPC or not release_reserve(path.parent):
            raise
        _write_then_rename(path, text)
    if path.name == SUMMARY:
        release_reserve(path.parent)
