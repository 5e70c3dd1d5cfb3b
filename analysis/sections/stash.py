"""Stash stalls (interconnect, network, CPU, disk) from the paired runs of a Stash study (`ddlbench stash run`)."""

from __future__ import annotations

from analysis import plots
from analysis.sections.base import Block, Report, add_figure


def draw(report: Report) -> None:
    if not report.measured or report.analysis.stash_runs().empty:
        return
    stalls = report.analysis.stash_stalls()
    report.blocks.append(Block("heading", "Stash stalls"))
    if stalls.empty:
        report.blocks.append(
            Block(
                "text",
                "No paired runs (synthetic on 1 GPU / N GPUs on 1 node / N over k nodes / "
                "real data warm and cold, same per-GPU batch and samples).",
            )
        )
        return
    report.blocks.append(Block("table", stalls.round(3), key=("stall_pct", "stall_pct_of_training")))
    add_figure(
        report.blocks,
        report.figures,
        "stash_stalls",
        lambda: plots.stash_bars(stalls),
        "Stash stalls, % of the paired baseline.",
    )
