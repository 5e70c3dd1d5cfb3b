"""The report's opening: what it holds and how its figures are computed, what ran on what (the device, the
system profile and the image size of the runs; meta.json's provenance: hosts, CUDA, NCCL, versions, git),
and each loader's settings.
"""

from __future__ import annotations

import json

import pandas as pd

from analysis.campaigns import campaign_counts, campaigns_line
from analysis.cells import loader_settings, setting_text
from analysis.device import GPU, device_names, run_devices
from analysis.report_blocks import Block, Report

# a torch build's CUDA (and, where a GPU is visible, NCCL) versions: facts of runs on GPUs only
GPU_PROVENANCE = ("meta.hardware.cuda", "meta.hardware.nccl")


def on_gpu(runs: pd.DataFrame) -> pd.Series:
    """Which runs ran on GPUs (analysis.device.run_devices): a CPU run on a GPU host is a CPU run."""
    return run_devices(runs).eq(GPU)


# what the runs were, before where they ran: the settings that make a 64 px CPU run and a 224 px GPU run
# two different things (config.yaml), each with the number of runs it holds where they differ
SETUP = {"config.system.name": "system profile", "config.model.image_size": "image size (px)"}


def provenance(runs: pd.DataFrame) -> pd.DataFrame:
    """Distinct values of the provenance columns (meta.json) over all runs; CUDA and NCCL over GPU runs."""
    rows = [{"what": "device", "value (runs)": _counted_values(device_names(runs))}] if len(runs) else []
    for column, what in SETUP.items():
        if column in runs and runs[column].notna().any():
            rows.append({"what": what, "value (runs)": _counted_values(setting_text(runs[column].dropna()))})
    wanted = [
        "meta.hardware.host",
        "meta.hardware.cuda",
        "meta.hardware.nccl",
        "meta.hardware.platform",
        "meta.launcher",
        "meta.git_sha",
        "meta.git_dirty",
        # the image the ranks ran in (docs/containers.md): runs of one campaign in two images show both
        "meta.container.image",
        "meta.container.digest",
        "meta.container.runtime_version",
    ]
    wanted += sorted(c for c in runs.columns if c.startswith("meta.versions."))
    for column in wanted:
        if column not in runs:
            continue
        values = (runs.loc[on_gpu(runs), column] if column in GPU_PROVENANCE else runs[column]).dropna().astype(str)
        values = values[~values.str.lower().isin(["none", "[]", "", "null"])]
        if values.empty:
            continue
        rows.append({"what": column.removeprefix("meta."), "value (runs)": _counted_values(values.map(short))})
    if "meta.started" in runs and runs["meta.started"].notna().any():
        started = runs["meta.started"].dropna().astype(str)
        rows.append({"what": "started", "value (runs)": f"{started.min()} .. {started.max()}"})
    return pd.DataFrame(rows, columns=["what", "value (runs)"])


def _counted_values(values: pd.Series) -> str:
    """The distinct values, with how many runs hold each where there are several (six at most)."""
    counts = values.astype(str).value_counts()
    shown = ", ".join(f"{v} ({n})" if len(counts) > 1 else v for v, n in counts.head(6).items())
    return shown + (f", ... ({len(counts)} distinct)" if len(counts) > 6 else "")


def short(value: str) -> str:
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        parsed = value
    if isinstance(parsed, str) and len(parsed) == 40 and all(c in "0123456789abcdef" for c in parsed):
        return parsed[:12]  # a git sha
    if isinstance(parsed, list):
        distinct = sorted({str(v) for v in parsed})
        return " + ".join(f"{v} x{parsed.count(v)}" if parsed.count(v) > 1 else v for v in distinct)
    return str(value)


def draw(report: Report) -> None:
    campaign, runs = report.campaign, report.campaign.runs
    counted, excluded = report.counted, report.analysis.excluded()
    report.blocks.append(Block("heading", f"ddlbench report: {campaign.root}", 1))
    counts = campaign_counts(runs)
    if len(counts) > 1:
        report.blocks.append(Block("text", campaigns_line(campaign.root, counts) + "."))
    report.blocks.append(
        Block(
            "text",
            (
                f"{len(runs)} run directories, {len(counted)} counted, {len(excluded)} excluded; "
                f"{len(campaign.steps):,} step records from {campaign.steps['run_id'].nunique() if len(campaign.steps) else 0} "
                f"runs; {len(campaign.problems)} skipped lines or files. Throughput is recomputed from the rank logs: "
                "per measured step (not warm-up, not profiled) the slowest rank's step time, img/s = global "
                "samples / their sum (the figure summary.json, `ddlbench results` and `compare` give). A cell is one "
                "configuration: runs are repeats only when every setting is equal; `variant` names the settings that "
                "tell apart cells that look alike. Repeats: median, and a 95% Student-t confidence interval of the "
                "mean (img/s 95% CI low..high)."
            ),
        )
    )
    report.blocks.append(Block("heading", "What was run, on what"))
    report.blocks.append(Block("table", provenance(runs)))
    loaders = loader_settings(counted)
    if loaders["loader"].isin(["native", "native_gpu", "dali"]).any():
        report.blocks.append(Block("heading", "Loader settings", 3))
        report.blocks.append(
            Block(
                "table",
                loaders,
                note=(
                    "Each loader's settings (config.yaml): its CPU workers (native, native_gpu: DataLoader worker "
                    "processes; dali: threads) against the rank's CPUs (system.cpus_per_rank; the default gives every "
                    "loader the rank's CPUs less one), its queue depth, and its decoder."
                ),
            )
        )
