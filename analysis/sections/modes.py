"""Seed study C's comparison: cells that differ only in data-parallel mode and precision, against the
baseline (PyTorch DDP, fp32, no ZeRO optimizer)."""

from __future__ import annotations

import pandas as pd

from analysis import metrics, plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.sections.base import Block, Report, add_figure, columns_shown


def modes_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis, cells: pd.DataFrame) -> None:
    """Seed study C's comparison, where cells differ only in data-parallel mode and precision and one of
    them is the baseline: a table per sample unit (throughput in img/s or seq/s, never mixed) and a figure
    per group of training time relative to the baseline, GPU utilisation, peak memory and PCIe traffic."""
    counted = analysis.counted()
    table = metrics.mode_cells(cells, counted, utilisation=analysis.utilisation(), memory=metrics.peak_memory(counted))
    if table.empty:
        return
    blocks.append(Block("heading", "Modes and precisions"))
    note = (
        "Cells that differ only in data-parallel mode (framework and its settings) and precision, one group "
        "per model and size. relative_time: the time to train the same samples against the group's "
        f"baseline, PyTorch DDP in full precision without the ZeRO optimizer ({metrics.MODE_BASELINE_TEXT}) "
        "= 1.0: the baseline's throughput over the cell's (below 1: faster; empty where a group holds "
        "several baseline cells). mode: the framework and its ZeRO stage where it has one; variant: the "
        "settings that tell alike cells apart (framework.zero_optimizer=True: DDP with torch's "
        "ZeroRedundancyOptimizer). GPU utilisation and PCIe rx/tx (host to GPU / GPU to host, GB = 1e9 "
        "bytes) are means over the telemetry samples of the whole run (see Utilisation); peak memory the "
        "largest torch.cuda peak over the cell's runs and ranks (GiB). Throughput is in each model's "
        "sample unit (summary.json's sample_unit: images, or sequences), one table per unit."
    )
    units = table.groupby("sample_unit", sort=True)
    for k, (unit, rows) in enumerate(units, 1):
        shown = columns_shown(rows, MODES_SHOWN)
        shown = shown[[c for c in shown if c not in metrics.MODES or shown[c].notna().any()]]
        rate = f"throughput{metrics.rate_suffix(unit)}"
        if table["sample_unit"].nunique() > 1:
            blocks.append(Block("text", f"Models whose samples are {unit} ({metrics.rate_label(unit)}):"))
        blocks.append(
            Block(
                "table",
                shown.rename(columns={"samples_s": rate}).round(2),
                note=note if k == len(units) else "",
                key=("relative_time", rate),
            )
        )
    for k, (_, rows) in enumerate(table.groupby("mode_group", sort=False)):
        first = rows.iloc[0]
        gpus = "CPU rank" if first["device"] == "cpu" else "GPU"
        title = (
            f"{first['model']}, {first['world_size']} {gpus}{'s' if first['world_size'] != 1 else ''} on "
            f"{first['num_nodes']} node{'s' if first['num_nodes'] != 1 else ''}, {first['per_gpu_batch']} "
            f"{first['sample_unit']} per {gpus}, {first['loader']}"
        )
        add_figure(
            blocks,
            figures,
            f"modes_{k}",
            lambda rows=rows, title=title: plots.mode_bars(rows, title=title),
            f"Modes and precisions, {title}: training time relative to the baseline, PyTorch DDP fp32 without the "
            f"ZeRO optimizer ({metrics.MODE_BASELINE_TEXT}) = 1.0 (dashed), then what each cell's telemetry and "
            "memory peaks have: GPU utilisation, peak GPU memory (filled: allocated, outline: reserved), PCIe rx "
            "and tx. One bar per cell, labelled with its mode, precision and variant; colour: framework, "
            "hatched: AMP.",
        )


MODES_SHOWN = [
    "model",
    "loader",
    "world_size",
    "num_nodes",
    "per_gpu_batch",
    "mode",
    "precision",
    "variant",
    "num_repeats",
    *metrics.MODES,
]


def draw(report: Report) -> None:
    if report.measured:
        modes_section(report.blocks, report.figures, report.analysis, report.cells)
