"""One completed run directory -> the history store's row (analysis/history/store.py): reading is lean, for
months of runs: meta.json and summary.json, the `run:` and `system:` blocks of config.yaml (the whole file only
once per cell, for its scaling group), and the rank logs; a run already in the store is recognised from meta.json
alone and not read further. The figures as `results` computes them (benchmarks/rundir/ `throughput` over the rank
logs; MFU and J/sample from summary.json; the time shares over the measured steps; the spread of the slowest
rank's step time), the run's marks (analysis/caveats.py), its date, hosts and versions, and the settings that are
no part of the cell."""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.history.store import run_key
from benchmarks.rundir import cell_identity, run_files, summary_schema

CAMPAIGN_KEY = "run.campaign"  # a setting of the run key; history follows a cell across campaigns without it
# the settings of NOT_IDENTITY that only say where and which run it is: no difference worth naming
BOOKKEEPING = ("run.repeat", "run.dir", "run.root", "run.campaign", "campaign", "experiment", "hydra")
# the top-level blocks of config.yaml that hold every NOT_IDENTITY setting a run writes
_BLOCKS = re.compile(r"^(?:run|system):.*\n(?:[ \t].*\n|[ \t]*\n)*", re.M)
# run.dir, run.root, run.campaign, run.repeat: left out before parsing, so that repeats parse one text once
_RUN_PLACE = re.compile(r"^  (?:dir|root|campaign|repeat):.*\n", re.M)


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


def cell_row(head: RunHead, config_text: str) -> dict:
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


def run_marks_of(heads: list[RunHead], rows: list[dict]) -> list[str]:
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
