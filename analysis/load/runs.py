"""One run directory -> its row of the runs table: config.yaml (the run's identity, as its cell hash reads
it), meta.json (size and provenance) and summary.json (each field checked against summary_schema.SUMMARY_FIELDS), and
whether the run counts (its status and reason).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from analysis.load.ranklogs import NO_STEP_RECORDS, RANK_LOG
from analysis.load.values import (
    INT64_MAX,
    Problems,
    checked,
    flatten,
    is_count,
    is_flag,
    is_name,
    is_size,
    json_type,
    one_line,
    quoted,
    read_json,
    scalar,
    schema_problem,
    shape_problem,
    valid_text,
)
from benchmarks.rundir import cell_identity, run_files, summary_schema

SUMMARY, META, CONFIG = run_files.SUMMARY, run_files.META, run_files.CONFIG


# meta.json keys too bulky or too free-form for a table column (kept in the file)
META_SKIP = {"argv", "env", "framework", "loader", "hardware.nvidia_smi_topo"}


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


# meta.json's flag: more ranks ran on a host than it had CPUs (its host_ranks and host_cores stay meta.* columns)
OVERSUBSCRIBED = "oversubscribed"


# what a completed run cannot be counted without
IDENTIFYING = ("framework", "loader", "model", "precision", "per_gpu_batch")


# columns of the runs table that a summary.json key must not overwrite
RESERVED = {
    "run_id", "run_dir", "cell", "status", "reason", "cell_hash", "group_hash", "strong_group_hash", "cache",
    OVERSUBSCRIBED,
}  # fmt: skip


def find_run_dirs(root: Path) -> list[Path]:
    """Every directory below root (root included) that looks like a run: config.yaml, meta.json, summary.json
    or a rank log (rundir_state.holds_a_run's files: rank 0 writes config.yaml first, so a launch that died right
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
    return (None, problem) if (problem := shape_problem(cfg, CONFIG)) else (cfg, None)


def _identify(row: dict, cfg: dict | None) -> str | None:
    """The run's cell (rundir's run key: every setting + its size) and its weak and strong scaling
    curves, from config.yaml and meta.json's world size and node count; why not, when they are unknown."""
    world, nodes = row.get("world_size"), row.get("num_nodes")
    if cfg is None:
        return f"no readable {CONFIG}: the run's settings are unknown, so it belongs to no cell"
    if not (is_size(world) and is_size(nodes)):
        return f"{META} has no world_size and num_nodes (integers >= 1): the run's size is unknown, so it belongs to no cell"
    try:  # settings no run writes raise: a list of mappings, a YAML date as a key, an infinite batch
        row.update(
            cell_hash=cell_identity.cell_hash(cfg, world_size=world, num_nodes=nodes),
            group_hash=cell_identity.group_hash(cfg, world_size=world, mode="weak"),
            strong_group_hash=cell_identity.group_hash(cfg, world_size=world, mode="strong"),
        )
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as error:
        return f"{CONFIG} holds settings no run writes ({error}), so the run belongs to no cell"
    return None


def _read_config_into(run_dir: Path, names: list[str], run_id: str, row: dict, problems: Problems) -> dict | None:
    """config.yaml flattened into `config.<key>` columns, and the identity columns it names (SETTINGS)."""
    if CONFIG not in names:
        return None
    cfg, error = _read_config(run_dir / CONFIG)
    if cfg is None:
        problems.add(run_id, run_dir / CONFIG, None, error)
        return None
    flatten(cfg, "config.", row)
    for key in (
        cell_identity.ADDED_SETTING_DEFAULTS
    ):  # a setting added later, at the value runs ran with before it: not a setting
        if cell_identity.is_added_setting_default(key, row.get(f"config.{key}")):
            del row[f"config.{key}"]
    for column, (key, kind) in SETTINGS.items():
        if (raw := _raw_setting(cfg, key)) is None:
            continue
        row[column], expected = checked(raw, kind)
        if expected:
            problems.add(run_id, run_dir / CONFIG, None, f"{key} {quoted(raw)} is not {expected}; ignored")
    arch, depth = _raw_setting(cfg, "model.arch"), _raw_setting(cfg, "model.depth")
    width, batch_norm = _raw_setting(cfg, "model.width"), _raw_setting(cfg, "model.batch_norm")
    residual, size = _raw_setting(cfg, "model.residual"), _raw_setting(cfg, "model.size")
    if (
        is_name(arch)
        and (depth is None or is_count(depth))
        and (width is None or (isinstance(width, int | float) and not isinstance(width, bool)))
        and all(v is None or isinstance(v, bool) for v in (batch_norm, residual))
        and (size is None or is_name(size))
    ):
        row["model"] = cell_identity.model_name(
            valid_text(str(arch)),
            depth,
            width=width,
            batch_norm=batch_norm,
            residual=True if residual is None else residual,
            size=None if size is None else valid_text(str(size)),
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


def _read_meta_into(run_dir: Path, names: list[str], run_id: str, row: dict, problems: Problems) -> None:
    """meta.json flattened into `meta.<key>` columns (META_SKIP stays in the file), its world size and
    node count checked into `world_size` / `num_nodes`, `oversubscribed` (more ranks on a host than CPUs:
    benchmarks/validate.py oversubscription; null where meta.json does not say), and `unsupported` for an
    unknown schema_version."""
    row[OVERSUBSCRIBED] = None
    if META not in names:
        return
    meta, error = read_json(run_dir / META)
    if not isinstance(meta, dict):
        problems.add(
            run_id, run_dir / META, None, error or f"{META} holds a JSON {json_type(meta)}, expected an object"
        )
        return
    row["meta.schema_version"] = scalar(meta.get("schema_version"))
    flatten({k: v for k, v in meta.items() if k != "schema_version"}, "meta.", row, META_SKIP)
    if (problem := schema_problem(meta.get("schema_version"), META)) is not None:
        row.update(status="unsupported", reason=problem)
    for column, kind in SIZE.items():
        if (raw := meta.get(column)) is not None:
            row[column], expected = checked(raw, kind)
            if expected:
                problems.add(run_id, run_dir / META, None, f"{column} {quoted(raw)} is not {expected}; ignored")
    if is_flag(raw := meta.get(OVERSUBSCRIBED)):
        row[OVERSUBSCRIBED] = raw
    elif raw is not None:
        problems.add(run_id, run_dir / META, None, f"{OVERSUBSCRIBED} {quoted(raw)} is not true or false; ignored")
    if (raw := meta.get(PROCESSES)) is not None:
        row[PROCESSES], expected = checked(raw, "size")
        if expected:
            problems.add(run_id, run_dir / META, None, f"{PROCESSES} {quoted(raw)} is not {expected}; ignored")


def _copy_summary(summary: dict, path: Path, run_id: str, row: dict, problems: Problems) -> None:
    """summary.json's fields into the row: each known field only with its type (summary_schema.SUMMARY_FIELDS), other
    keys only as plain scalars and never over the table's own columns. Where config.yaml already
    identifies the run it wins, and a summary that disagrees is listed; the size is meta.json's alone."""
    for key, value in summary.items():
        key = valid_text(str(key))
        if key == "schema_version":
            row[key] = value if is_count(value) else None  # an unknown one excludes the run, with the value
        elif key in RESERVED or "." in key:
            if key not in ("status", "cell_hash"):  # read below; the hash is recomputed from config.yaml
                problems.add(run_id, path, None, f"key {key!r} would overwrite the runs table's own column; ignored")
        elif key in summary_schema.SUMMARY_FIELDS:
            if value is None:
                continue
            value, expected = checked(value, summary_schema.SUMMARY_FIELDS[key])
            if expected:
                problems.add(run_id, path, None, f"{key} {quoted(summary[key])} is not {expected}; ignored")
            elif key in SIZE or key == PROCESSES:
                continue  # meta.json's alone, as in the cell hash; _summary_status compares them
            elif row.get(key) is None:
                row[key] = value
            elif row[key] != value:
                problems.add(
                    run_id,
                    path,
                    None,
                    f"{key} {quoted(value)} differs from {CONFIG}'s {quoted(row[key])}; {CONFIG}'s is used",
                )
        elif type(value) in (str, bool, float) or (type(value) is int and -INT64_MAX - 1 <= value <= INT64_MAX):
            row[key] = scalar(value)  # a field this version does not know: kept when it is a plain scalar


def _summary_status(summary: dict, row: dict, cfg: dict | None, rank_files: dict[int, Path]) -> tuple[str, str | None]:
    """(status, reason) of a run whose summary.json is readable and of a supported schema."""
    status = summary.get("status")
    if (
        isinstance(status, str) and status in summary_schema.RETRIED_STATES
    ):  # failed, interrupted, hung: the summary says why
        error = summary.get("error")
        reason = f"{status}: {one_line(error) if isinstance(error, str) and error.strip() else 'no error recorded'}"
        # every rank's own error (launchers/lifecycle/supervise.py): the one that failed first may not be rank 0
        ranks = summary.get("rank_errors")
        if isinstance(ranks, dict):
            shown = [f"rank {r}: {one_line(e)[:160]}" for r, e in ranks.items() if isinstance(e, str) and e != error]
            if shown:
                reason += "; the ranks said: " + "; ".join(shown[:4])
        return status, reason
    if status != "completed":
        return "corrupt", (
            f"{SUMMARY} status {quoted(status)} is not one a run writes (completed, failed, interrupted, hung)"
        )
    if (problem := _identify(row, cfg)) is not None:
        return "corrupt", problem
    for column in SIZE:
        if is_size(summary.get(column)) and summary[column] != row[column]:
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


def _rank_files(run_dir: Path, names: list[str], run_id: str, problems: Problems) -> dict[int, Path]:
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


def run_row(run_dir: Path, root: Path, problems: Problems) -> tuple[dict, dict[int, Path]]:
    run_id = valid_text(run_dir.relative_to(root).as_posix() if run_dir != root else run_dir.name)
    row: dict[str, Any] = {
        "run_id": run_id,
        "run_dir": str(run_dir),
        "cell": valid_text(run_dir.name),
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
    summary, error = read_json(run_dir / SUMMARY)
    if not isinstance(summary, dict):
        reason = error or f"{SUMMARY} holds a JSON {json_type(summary)}, expected an object"
        problems.add(run_id, run_dir / SUMMARY, None, reason)
        if row["status"] is None:
            row.update(status="corrupt", reason=one_line(reason))
        return row, rank_files
    if row["status"] is not None:  # unsupported meta.json wins
        return row, rank_files
    _copy_summary(summary, run_dir / SUMMARY, run_id, row, problems)
    if (problem := schema_problem(summary.get("schema_version"), SUMMARY)) is not None:
        row.update(status="unsupported", reason=problem)
    else:
        status, reason = _summary_status(summary, row, cfg, rank_files)
        row.update(status=status, reason=reason)
    return row, rank_files
