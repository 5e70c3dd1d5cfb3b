"""Figures that only the paper report draws (drawing only: the tables come computed). Study layouts the
general report already draws (throughput and efficiency per model, the breakdown beside the study's,
Stash stalls, mode bars) are their analysis modules' (analysis/scaling.py, time_shares.py, stash.py, modes.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import curves, finish, gpu_axis, legend_columns, model_names, panels, paper_style
from analysis.palette import FULL_WIDTH_IN, IDEAL_COLOR, framework_color, loader_style

MEASURED, PUBLISHED, PREDICTED = "#1f77b4", "#7f7f7f", "#ff7f0e"


@paper_style
def speedup_vs_gpus(scaled: pd.DataFrame) -> Figure:
    """Speedup = throughput(N) / throughput(N0) vs GPUs, one panel per model, one curve per framework x
    loader (colour: framework; line: loader), the ideal N / N0 dotted."""
    models = model_names(scaled)
    fig, axes = panels(len(models))
    for ax, model in zip(axes, models):
        rows_m = scaled[scaled["model"] == model]
        for framework, loader, label, marker, rows, _extra in curves(rows_m):
            rows = rows.dropna(subset=["speedup"])
            if rows.empty:
                continue
            ax.plot(
                rows["world_size"],
                rows["speedup"],
                loader_style(loader)[0],
                marker=marker,
                color=framework_color(framework),
                label=label,
            )
            base = float(rows["baseline_gpus"].iloc[0])
            x = rows["world_size"].to_numpy(float)
            ax.plot(x, x / base, color=IDEAL_COLOR, linestyle=(0, (1, 2)), linewidth=0.8, label="ideal (N / N0)")
        gpu_axis(ax, rows_m["world_size"], log_y=True)
        ax.set_title(model)
        ax.set_ylabel("speedup (x)")
    return finish(fig, axes, legend_cols=legend_columns(axes))


@paper_style
def beside_published(table: pd.DataFrame, *, label: str, value: str, published: str, unit: str, title: str) -> Figure:
    """One bar pair per row: the measured value (filled) beside the published one (grey); rows without a
    published value get the measured bar alone, rows without a measurement the published bar alone."""
    fig, (ax,) = panels(1, row_height_in=max(2.0, 0.32 * len(table) + 0.8), width_in=FULL_WIDTH_IN)
    y = np.arange(len(table))
    measured = pd.to_numeric(table[value], errors="coerce").to_numpy(float)
    ref = pd.to_numeric(table[published], errors="coerce").to_numpy(float)
    if np.isnan(ref).all():  # the study gives no number for any row: one bar each, and the title says so
        ax.barh(y, np.nan_to_num(measured), 0.6, color=MEASURED, label="measured (these runs)")
        title += " (the study's values are not in its text)"
    else:
        height = 0.38
        ax.barh(y - height / 2, np.nan_to_num(measured), height, color=MEASURED, label="measured (these runs)")
        ax.barh(y + height / 2, np.nan_to_num(ref), height, color=PUBLISHED, label="published (the study)")
        for k, (m, r) in enumerate(zip(measured, ref)):
            if np.isnan(m):
                ax.text(0, k - height / 2, " not measured", va="center", fontsize=7, color="#555")
            if np.isnan(r):
                ax.text(0, k + height / 2, " not published", va="center", fontsize=7, color="#555")
    ax.axvline(0, color="#333", linewidth=0.8)
    ax.set_yticks(y, table[label].astype(str).tolist())
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title)
    return finish(fig, [ax], legend_cols=2, left_in=2.6)
