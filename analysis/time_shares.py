"""Where the time goes, from the phase timers: each run's data / compute / allreduce / other shares of its
step time, per cell; their stacked bars; the report's time-shares section.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from analysis.cells import CELL, PHASES, SHARES, measured, per_cell_mean
from analysis.device import rank_words
from analysis.figures import finish, gpu_labels, legend_columns, model_names, panels, paper_style, pretty
from analysis.palette import BREAKDOWN_COLORS, framework_color
from analysis.report_blocks import Block, Report, add_figure, columns_shown, percent


def breakdown(steps: pd.DataFrame) -> pd.DataFrame:
    """Per run, time shares of the measured steps summed over ranks and steps:
    data_share, compute_share (fwd+bwd+opt minus exposed allreduce where that is measured),
    allreduce_share (total, overlapped or not), allreduce_exposed_share, other_share (step minus
    data, compute and exposed allreduce). data + compute + exposed + other = 1; allreduce_share is
    NaN where the framework did not time its collectives (then it sits inside compute).
    host_data_share: the host blocked in the loader (host_data_s) over step time, outside that sum: on a
    GPU, queued work can hide a late batch from data_share but not from this (NaN in older logs)."""
    rows = measured(steps, ["run_id", *PHASES])
    present = [c for c in PHASES if c in rows]
    sums = rows.groupby("run_id", observed=True)[present].sum(min_count=1)
    for column in PHASES:
        if column not in sums:
            sums[column] = np.nan
    exposed = sums["comm_exposed_s"].fillna(0.0)
    compute = sums[["fwd_s", "bwd_s", "opt_s"]].sum(axis=1, min_count=1) - exposed
    data = sums["data_s"].fillna(0.0)
    step = sums["step_s"]
    out = pd.DataFrame(
        {
            "run_id": sums.index.astype(str),
            "data_share": (data / step).to_numpy(),
            "compute_share": (compute / step).to_numpy(),
            "allreduce_share": (sums["comm_s"] / step).to_numpy(),
            "allreduce_exposed_share": (sums["comm_exposed_s"] / step).to_numpy(),
            "other_share": ((step - data - compute - exposed) / step).to_numpy(),
            "host_data_share": (sums["host_data_s"] / step).to_numpy(),
            "comm_measured": sums["comm_s"].notna().to_numpy(),
        }
    )
    return out.reset_index(drop=True)


def breakdown_cells(shares: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Per-run shares -> one row per cell (mean over repeats), keyed like `cells`."""
    return per_cell_mean(shares, per_run, SHARES)


BREAKDOWN_PARTS = [
    ("data", "data_share"),
    ("compute", "compute_share"),
    ("allreduce (exposed)", "allreduce_exposed_share"),
    ("other", "other_share"),
]


@paper_style
def breakdown_bars(shares: pd.DataFrame, *, model: str) -> Figure:
    """Stacked time shares per GPU count (or CPU rank count: the shares' `device`) for one model: one panel
    per framework x loader. The black tick marks the total allreduce (overlapped or not) where it was
    measured. Cells that share a count are lettered (2a, 2b), what tells them apart said in the legend."""
    rows_m = shares[shares["model"] == model]
    words = rank_words(rows_m)
    combos = list(rows_m.groupby(["framework", "loader"]).groups)
    fig, axes = panels(len(combos), row_height_in=2.2, sharey=True)
    for ax, (framework, loader) in zip(axes, combos):
        rows = rows_m[(rows_m["framework"] == framework) & (rows_m["loader"] == loader)]
        # every cell is a bar: cells that share a GPU count (another batch, another node layout, any other
        # setting) stand side by side, each labelled with what tells it apart
        rows = rows.sort_values([c for c in ("world_size", "num_nodes", "variant") if c in rows])
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for label, column in BREAKDOWN_PARTS:
            values = 100 * rows[column].fillna(0).to_numpy(float)
            ax.bar(x, values, 0.75, bottom=bottom, color=BREAKDOWN_COLORS[label], label=label, linewidth=0)
            bottom += values
        total = 100 * rows["allreduce_share"].to_numpy(float)
        if np.isfinite(total).any():
            ax.plot(
                x,
                total,
                linestyle="none",
                marker="_",
                markersize=12,
                markeredgewidth=1.6,
                color="black",
                label="allreduce (total)",
            )
        labels, key = gpu_labels(rows)
        ax.set_xticks(x, labels)
        for line in key:  # a legend entry without a mark: what a lettered bar is
            ax.plot([], [], linestyle="none", label=line)
        ax.set_xlabel(words.axis)
        ax.set_ylim(0, 100)
        ax.yaxis.set_major_formatter(PercentFormatter())
        ax.set_title(f"{pretty(framework)}, {pretty(loader)}", color=framework_color(framework))
        ax.set_ylabel("share of step time")
    return finish(fig, axes, title=f"Time breakdown, {pretty(model)}", legend_cols=legend_columns(axes))


def draw(report: Report) -> None:
    if not report.measured:
        return
    shares = report.shares
    report.blocks.append(Block("heading", "Where the time goes"))
    report.blocks.append(
        Block(
            "table",
            percent(columns_shown(shares, [*CELL, "variant", *SHARES]), SHARES).rename(
                columns={c: c.replace("_share", "_pct") for c in SHARES}
            ),
            note=(
                "Shares of step time over all ranks and measured steps: data (waiting for the next batch: the device on "
                "GPUs, the host on CPUs), "
                "compute (fwd + bwd + opt minus exposed allreduce), exposed allreduce, other (the rest). "
                "allreduce_pct is the total allreduce time, overlapped or not; empty where the framework's "
                "collectives are not timed. host_data_pct is the host's time blocked in the loader: on a GPU, "
                "work queued ahead can hide a late batch from data_pct, not from host_data_pct."
            ),
            key=tuple(c.replace("_share", "_pct") for c in SHARES),
        )
    )


def draw_bars(report: Report) -> None:
    """The shares per GPU count as bars, one figure per model (after the sections that explain them)."""
    if not report.measured:
        return
    shares = report.shares
    if "cell_hash" in shares:
        shares = shares.assign(device=shares["cell_hash"].map(report.cells.set_index("cell_hash")["device"]))
    for model in model_names(shares):
        add_figure(
            report.blocks,
            report.figures,
            f"breakdown_{model}",
            lambda model=model: breakdown_bars(shares, model=model),
            f"Time breakdown per {report.words.one} count, {model}.",
        )
