"""Where the time goes, from the phase timers: the shares of step time (data, compute, exposed allreduce,
other) per cell, and a bar chart per model of the shares per GPU count."""

from __future__ import annotations

from analysis import metrics, plots
from analysis.sections.base import Block, Report, add_figure, columns_shown, percent


def draw(report: Report) -> None:
    if not report.measured:
        return
    shares = report.shares
    report.blocks.append(Block("heading", "Where the time goes"))
    report.blocks.append(
        Block(
            "table",
            percent(columns_shown(shares, [*metrics.CELL, "variant", *metrics.SHARES]), metrics.SHARES).rename(
                columns={c: c.replace("_share", "_pct") for c in metrics.SHARES}
            ),
            note=(
                "Shares of step time over all ranks and measured steps: data (waiting for the next batch: the device on "
                "GPUs, the host on CPUs), "
                "compute (fwd + bwd + opt minus exposed allreduce), exposed allreduce, other (the rest). "
                "allreduce_pct is the total allreduce time, overlapped or not; empty where the framework's "
                "collectives are not timed. host_data_pct is the host's time blocked in the loader: on a GPU, "
                "work queued ahead can hide a late batch from data_pct, not from host_data_pct."
            ),
            key=tuple(c.replace("_share", "_pct") for c in metrics.SHARES),
        )
    )


def draw_bars(report: Report) -> None:
    """The shares per GPU count as bars, one figure per model (after the sections that explain them)."""
    if not report.measured:
        return
    shares = report.shares
    for model in plots._models(shares):
        add_figure(
            report.blocks,
            report.figures,
            f"breakdown_{model}",
            lambda model=model: plots.breakdown_bars(shares, model=model),
            f"Time breakdown per GPU count, {model}.",
        )
