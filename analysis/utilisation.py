"""GPU and host utilisation from telemetry (NVML, psutil): per run and per cell; the bars; the report's section."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from analysis.cells import CELL, cell_key, per_cell_mean
from analysis.device import with_device
from analysis.figures import (
    cell_label_parts,
    cell_labels,
    finish,
    panel_title,
    panels,
    paper_style,
    pretty,
    shared_parts,
)
from analysis.palette import framework_color
from analysis.report_blocks import Block, Report, add_figure, columns_shown

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


# column -> (telemetry field, statistic, scale): benchmarks/telemetry.py's fields, in the units the name says.
# GPU fields over every sample of every GPU; host fields (HOST_FIELDS) over one rank per host
UTILISATION = {
    "gpu_util_pct_mean": ("gpu_util_percent", "mean", 1.0),
    "gpu_util_pct_p95": ("gpu_util_percent", "p95", 1.0),
    "gpu_mem_used_gb_peak": ("gpu_mem_used_bytes", "max", 1e-9),
    "pcie_rx_gb_s_mean": ("pcie_rx_bytes_s", "mean", 1e-9),
    "pcie_tx_gb_s_mean": ("pcie_tx_bytes_s", "mean", 1e-9),
    "nvlink_rx_gb_s_mean": ("nvlink_rx_bytes_s", "mean", 1e-9),
    "nvlink_tx_gb_s_mean": ("nvlink_tx_bytes_s", "mean", 1e-9),
    "cpu_pct_mean": ("cpu_percent", "mean", 1.0),
    "host_mem_used_gb_peak": ("host_mem_used_bytes", "max", 1e-9),
}

# host-wide fields repeat on every rank of a host (benchmarks/telemetry.py): one rank's samples per host count
HOST_FIELDS = ("cpu_percent", "host_mem_used_bytes")
_STATISTIC = {"mean": "mean", "max": "max", "p95": lambda values: values.quantile(0.95)}


def utilisation_runs(telemetry: pd.DataFrame) -> pd.DataFrame:
    """Per run with telemetry: UTILISATION's columns over all its samples (the whole run, sampler start to
    stop: the rank logs carry no wall-clock times to match the measured window to), and num_samples. GPU
    fields pool every GPU's samples (all sample at one rate); CPU % and host memory use the lowest rank of
    each host (`host`; every rank where samples have none). NaN where no sample has the field (no NVML, no
    NVLink counters)."""
    columns = ["run_id", "num_samples", *UTILISATION]
    if telemetry.empty or "run_id" not in telemetry:
        return pd.DataFrame(columns=columns)
    frame = telemetry.assign(run_id=telemetry["run_id"].astype(str))
    out = frame.groupby("run_id").size().rename("num_samples").to_frame()
    host_rows = frame
    if "host" in frame and "rank" in frame:
        rank = pd.to_numeric(frame["rank"], errors="coerce")
        first = rank.groupby([frame["run_id"], frame["host"].astype(str)]).transform("min")
        host_rows = frame[(rank == first) | rank.isna()]  # a sample without a rank cannot be told apart
    for column, (field, statistic, scale) in UTILISATION.items():
        rows = host_rows if field in HOST_FIELDS else frame
        if field not in rows:
            out[column] = np.nan
            continue
        values = pd.to_numeric(rows[field], errors="coerce").astype("float64")
        out[column] = values.groupby(rows["run_id"]).agg(_STATISTIC[statistic]).reindex(out.index) * scale
    return out.reset_index()[columns]


def utilisation_cells(per_run_utilisation: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """utilisation_runs() per cell (mean over the repeats with telemetry; counted runs only), keyed like `cells`,
    with num_repeats: how many of them had telemetry."""
    frame = per_run_utilisation[per_run_utilisation["run_id"].isin(set(per_run["run_id"].astype(str)))]
    if frame.empty:
        return pd.DataFrame(columns=[*CELL, "variant", "num_repeats", *UTILISATION])
    frame = frame.assign(num_repeats=1.0)
    runs = per_run.assign(run_id=per_run["run_id"].astype(str))
    by = cell_key(runs)
    merged = frame.merge(runs[["run_id", *by]], on="run_id")
    counts = merged.groupby(by, dropna=False, observed=True)["num_repeats"].sum().astype("int64").reset_index()
    out = per_cell_mean(frame, runs, list(UTILISATION)).merge(counts, on=by)
    return out[[c for c in out if c not in UTILISATION] + list(UTILISATION)]


# the utilisation figure's panels (of UTILISATION's columns; the table has them all): column ->
# (title, x axis label)
UTILISATION_PANELS = {
    "gpu_util_pct_mean": ("GPU util, mean", "%"),
    "gpu_util_pct_p95": ("GPU util, p95", "%"),
    "pcie_rx_gb_s_mean": ("PCIe rx (to GPU), mean", "GB/s"),
    "pcie_tx_gb_s_mean": ("PCIe tx (from GPU), mean", "GB/s"),
    "nvlink_rx_gb_s_mean": ("NVLink rx, mean", "GB/s"),
    "cpu_pct_mean": ("host CPU, mean", "%"),
}


@paper_style
def utilisation_bars(cells: pd.DataFrame) -> Figure:
    """One panel per utilisation figure (UTILISATION_PANELS that some cell has), one horizontal bar per
    cell in every panel, labelled on the left of each row of panels (colour = framework, hatched = DALI; its
    ranks named by the cells' `device`), what every bar shares in the title."""
    rows = cells.reset_index(drop=True)
    metrics_shown = [c for c in UTILISATION_PANELS if c in rows and rows[c].notna().any()]
    labels = cell_labels(rows)
    ncols = min(3, max(1, len(metrics_shown)))
    fig, axes = panels(
        max(1, len(metrics_shown)), ncols=ncols, row_height_in=max(1.4, 0.16 * len(rows) + 0.6), sharey=True
    )
    y = np.arange(len(rows))
    colors = [framework_color(f) for f in rows["framework"]]
    hatches = ["////" if loader == "dali" else None for loader in rows["loader"]]
    for ax, column in zip(axes, metrics_shown):
        bars = ax.barh(y, rows[column].to_numpy(float), 0.7, color=colors, edgecolor="white", linewidth=0.3)
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
        title, unit = UTILISATION_PANELS[column]
        ax.set_title(title)
        ax.set_xlabel(unit)
        if unit == "%":
            ax.set_xlim(0, 100)
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="y", labelsize=6)
    if metrics_shown:
        axes[0].set_yticks(y, labels)
        axes[0].invert_yaxis()  # the table's order, top to bottom
    for framework in dict.fromkeys(rows["framework"]):
        axes[0].add_patch(Rectangle((0, 0), 0, 0, color=framework_color(framework), label=pretty(framework)))
    if (rows["loader"] == "dali").any():
        axes[0].add_patch(Rectangle((0, 0), 0, 0, facecolor="white", edgecolor="#555555", hatch="////", label="DALI"))
    left_in = min(3.2, 0.3 + 0.042 * max((len(label) for label in labels), default=0))
    title = panel_title("Utilisation per configuration", shared_parts(cell_label_parts(rows)))
    return finish(fig, axes, title=title, left_in=left_in)


UTILISATION_SHOWN = [*CELL, "variant", "num_repeats", *UTILISATION]
UTILISATION_KEY = ("gpu_util_pct_mean", "gpu_util_pct_p95", "cpu_pct_mean")


def utilisation_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Per cell, what the GPUs, their links and the hosts were doing (telemetry), where counted runs have it."""
    table = analysis.utilisation()
    if table.empty:
        return
    shown = columns_shown(table, UTILISATION_SHOWN)
    shown = shown[[c for c in shown if c not in UTILISATION or shown[c].notna().any()]]
    blocks.append(Block("heading", "Utilisation"))
    blocks.append(Block("text", "Per cell, what its GPUs, their links and its hosts were doing (telemetry)."))
    blocks.append(
        Block(
            "table",
            shown.round(1),
            key=UTILISATION_KEY,
            note=(
                "From the telemetry samples (benchmarks/telemetry.py) over the whole run, sampler start to stop "
                "(start-up, warm-up and evaluations included: the rank logs carry no wall-clock times to match the "
                "measured window to), mean over the cell's repeats with telemetry (num_repeats). GPU figures pool "
                "every GPU's samples; p95 is the 95th percentile of the samples; peaks are the largest sample. "
                "CPU % and host memory are host-wide, one rank per host. GB = 1e9 bytes; PCIe rx is host to GPU. "
                "A column no sample has (NVLink without its counters, GPU fields without NVML) is left out."
            ),
        )
    )
    if any(c in shown for c in UTILISATION_PANELS):
        add_figure(
            blocks,
            figures,
            "utilisation",
            lambda: utilisation_bars(with_device(table, analysis.counted())),  # CPU ranks are no GPUs
            "Utilisation per configuration over the whole run (one bar per cell; colour: framework, hatched: DALI).",
        )


def draw(report: Report) -> None:
    utilisation_section(report.blocks, report.figures, report.analysis)
