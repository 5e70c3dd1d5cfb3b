"""Figures that only the paper report draws (drawing only: the tables come computed). Study layouts the
general report already draws (throughput and efficiency per model, the breakdown beside the study's,
Stash stalls, mode bars) are their analysis modules' (analysis/scaling.py, time_shares.py, stash.py, modes.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.device import rank_words
from analysis.figures import (
    IDEAL_DASHES,
    IDEAL_LABEL,
    curves,
    finish,
    gpu_axis,
    legend_columns,
    model_names,
    panel_title,
    panels,
    paper_style,
)
from analysis.palette import FULL_WIDTH_IN, IDEAL_COLOR, loader_style

MEASURED, PUBLISHED, PREDICTED = "#1f77b4", "#7f7f7f", "#ff7f0e"


@paper_style
def speedup_vs_gpus(scaled: pd.DataFrame) -> Figure:
    """Speedup = throughput(N) / throughput(N0) vs GPUs (or CPU ranks), one panel per model, one curve per
    configuration in a colour of its own (line: loader), its ideal N / N0 dashed in the same colour (one grey
    line where curves share their N0: their ideals are one line)."""
    models = model_names(scaled)
    words = rank_words(scaled)
    fig, axes = panels(len(models))
    for ax, model in zip(axes, models):
        rows_m = scaled[scaled["model"] == model]
        drawn, shared = curves(rows_m)
        bases = [
            float(c.line["baseline_gpus"].dropna().iloc[0]) for c in drawn if c.line["baseline_gpus"].notna().any()
        ]
        for c in drawn:
            rows = c.line.dropna(subset=["speedup"])
            if rows.empty:
                continue
            style = loader_style(c.loader)[0]
            ax.plot(rows["world_size"], rows["speedup"], style, marker=c.marker, color=c.color, label=c.label)
            base = float(rows["baseline_gpus"].iloc[0])
            x = rows["world_size"].to_numpy(float)
            # curves of one N0 share one ideal, grey; a curve's own N0 gets its ideal in its colour
            color = c.color if bases.count(base) == 1 else IDEAL_COLOR
            ax.plot(x, x / base, color=color, linestyle=IDEAL_DASHES, linewidth=0.8, alpha=0.8, label="_ideal")
        ax.plot([], [], color=IDEAL_COLOR, linestyle=IDEAL_DASHES, linewidth=0.8, label=IDEAL_LABEL)
        gpu_axis(ax, rows_m["world_size"], log_y=True, label=words.axis)
        ax.set_title(panel_title(model, shared))
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
    longest = max((len(str(v)) for v in table[label]), default=0)  # the labels' width, not a fixed third
    return finish(fig, [ax], legend_cols=2, left_in=min(3.2, 0.35 + 0.055 * longest))
