"""Run directories (any depth below a root) -> tidy pandas DataFrames.

Tables (column names follow docs/architecture.md):
- runs: one row per run directory: `run_id` (path below the root), `status`, `reason`, the
  summary's fields, the resolved config flattened as `config.<key>` and provenance as `meta.<key>`;
  `oversubscribed`: more ranks ran on a host than it had CPUs (meta.json, with `meta.host_ranks` and
  `meta.host_cores`; null for runs whose meta.json does not say);
- steps: one row per rank per logged step of every *completed* run (rank<R>.jsonl);
- telemetry: one row per sample of telemetry*.jsonl (whatever keys are there, flattened);
- commbench: one row per measurement of commbench*.json (op, size_bytes, algbw_gb_s, ...);
- traces: one row per rank of every completed run with a trace window (breakdown_rank<R>.json):
  the window's seconds by class (TRACE_COLUMNS);
- evals: one row per evaluation (eval.jsonl) of every completed run: EVAL_FIELDS, and the training
  progress (EVAL_OPTIONAL_FIELDS: train_samples, train_s, epochs) where the file has it, else null;
- ranks: one row per rank log of every completed run: `run_id`, `rank`, and from its header line the
  `host` it ran on, its `local_rank` and its launcher `node` (null where the header lacks them);
- problems: every line, file or field that was skipped, and why.

Only `status == "completed"` runs are counted; everything else stays in `runs` with its reason.

This module sanitises: no bytes in any file of a run directory make it raise, and what it hands on
is well typed, so metrics and report never check types:
- a step line is kept only when every field of run_files.STEP_FIELDS it holds has its type (integers
  >= 0, true/false, seconds finite and >= 0), the required ones are there, and its step was not
  logged before by the same rank; any other line is skipped and listed in `problems`. The steps
  table has STEP_FIELDS' dtypes (an optional integer field that some line lacks is nullable Int64;
  a missing `profiled` is False, as summary_schema.is_measured reads it);
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

Here: the campaign (every run's row and tables, read in threads), its Parquet export and the studies'
references. One module per kind of file below it: runs.py (config.yaml, meta.json, summary.json -> a run's
row and status), ranklogs.py (rank<R>.jsonl -> steps), records.py (telemetry, trace windows, evaluations,
commbench), values.py (what each field must be, the problems list).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.load.ranklogs import HAVE_ARROW, pa, ranks_frame, read_run_logs, steps_frame
from analysis.load.records import (
    COMMBENCH,
    COMMBENCH_FIELDS,
    COMMBENCH_OPTIONAL_DTYPES,
    TRACE_COLUMNS,
    evals_frame,
    read_commbench,
    run_evals,
    run_telemetry,
    run_traces,
)
from analysis.load.runs import find_run_dirs, run_row
from analysis.load.values import LogWarning, Problems, is_count, is_flag, one_line, valid_text

# the package's face: what the report, results, compare and the tests read
__all__ = ["Campaign", "LogWarning", "export_parquet", "load_campaign", "load_reference", "load_runs", "parquet_safe"]


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
    evals: pd.DataFrame = field(default_factory=lambda: evals_frame([]))  # a row per evaluation
    ranks: pd.DataFrame = field(default_factory=lambda: ranks_frame([]))  # a row per rank log: its host

    @property
    def counted(self) -> pd.DataFrame:
        """The runs that count: completed ones."""
        return self.runs[self.runs["status"] == "completed"]

    @property
    def excluded(self) -> pd.DataFrame:
        """The runs that do not count, with their reason."""
        return self.runs[self.runs["status"] != "completed"]


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
    problems = Problems()
    rows: list[dict] = []
    parts: list[tuple[int, Any]] = []
    telemetry: list[dict] = []
    run_ids: list[str] = []
    to_read: list[tuple[int, dict, dict[int, Path], Future]] = []
    headers: list[dict] = []
    log_problems = Problems()  # listed after the run directories' problems, wherever the threads are
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for run_dir in find_run_dirs(root):
            row, rank_files = run_row(run_dir, root, problems)
            if row["status"] == "completed" or (steps_of_all_runs and row["status"] != "unsupported"):
                # the pool's threads parse the rank logs (Arrow and numpy let go of the GIL) while this one
                # reads the next run directories and the telemetry, which is Python's json
                future = pool.submit(read_run_logs, row["run_id"], rank_files, log_problems)
                to_read.append((len(rows), row, rank_files, future))
            rows.append(row)
            run_ids.append(row["run_id"])
            telemetry += run_telemetry(run_dir, row, problems)
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
        for t in run_traces(Path(row["run_dir"]), row, problems)
    ]
    evals = [
        e
        for row in rows
        if row["status"] == "completed" and row["run_id"] not in bad
        for e in run_evals(Path(row["run_dir"]), row, problems)
    ]
    commbench: list[dict] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if COMMBENCH.match(name):
                commbench += read_commbench(Path(dirpath) / name, root, problems)
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
        steps=steps_frame(parts, run_ids),
        telemetry=pd.DataFrame(telemetry),
        commbench=commbench_frame,
        problems=problems.frame(),
        traces=pd.DataFrame(traces, columns=TRACE_COLUMNS),
        evals=evals_frame(evals),
        ranks=ranks_frame([h for h in headers if h["run_id"] not in bad]),
    )


def load_runs(root: Path) -> pd.DataFrame:
    """One row per run directory: the summary's fields, `status`, and `reason` for runs not counted.

    A directory without summary.json is `incomplete` (a run that died or is still running); a summary
    that cannot be parsed is `corrupt`; an unknown schema_version is `unsupported`. Only
    status == 'completed' rows carry metrics. Rank logs are not read (see load_campaign).
    """
    root = Path(root)
    problems = Problems()
    rows = [run_row(run_dir, root, problems)[0] for run_dir in find_run_dirs(root)]
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
BOOL_COLUMNS = ("target_reached", "oversubscribed")


def _tidy_runs(rows: list[dict]) -> pd.DataFrame:
    """Rows -> the runs table; counts are nullable integers (Int64), whichever runs lack them."""
    runs = pd.DataFrame(rows)
    if runs.empty:
        return pd.DataFrame(columns=["run_id", "run_dir", "cell", "status", "reason"])
    runs["reason"] = [one_line(r) if isinstance(r, str) else None for r in runs["reason"]]
    for column in INT_COLUMNS:
        if column in runs:
            # from the rows, not the frame: pandas turns a column of ints and Nones into floats
            runs[column] = pd.array([v if is_count(v := row.get(column)) else None for row in rows], dtype="Int64")
    for column in BOOL_COLUMNS:
        if column in runs:
            runs[column] = pd.array([v if is_flag(v := row.get(column)) else None for row in rows], dtype="boolean")
    return runs


def parquet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns Arrow cannot store as they are (an int in one run and a string in another, an
    integer beyond int64) become text."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype == object:
            kinds = {type(v) for v in frame[column].dropna()}
            if len(kinds) > 1 or not _arrow_takes(frame[column]):
                frame[column] = frame[column].map(lambda v: None if v is None or v != v else valid_text(str(v)))
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

    if not HAVE_ARROW:
        raise ConfigError("--parquet needs the pyarrow package; run 'pip install pyarrow' in the ddlbench environment")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--parquet {out} is not empty (never overwritten); pass a new folder")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in ("runs", "steps", "telemetry", "commbench", "problems", "traces"):
        path = out / f"{name}.parquet"
        parquet_safe(getattr(campaign, name)).to_parquet(path, index=False)
        written.append(path)
    return written


REFERENCES = {"aach2023": "aach2023_breakdown.csv"}


def load_reference(name: str) -> pd.DataFrame:
    """A shipped reference table (analysis/reference/), e.g. seed study A's DDP breakdown."""
    from benchmarks.errors import ConfigError

    if name not in REFERENCES:
        raise ConfigError(f"--reference {name} is not known; use one of: {', '.join(REFERENCES)}")
    return pd.read_csv(Path(__file__).resolve().parents[1] / "reference" / REFERENCES[name])
