"""Collective bandwidth from `ddlbench commbench`'s records: bus bandwidth against message size."""

from __future__ import annotations

from analysis import metrics, plots
from analysis.sections.base import Block, Report, add_figure


def draw(report: Report) -> None:
    records = report.campaign.commbench
    collectives = records[~records["op"].isin(metrics.GPU_TEST_OPS)]
    if collectives.empty or not collectives["busbw_gb_s"].notna().any():
        return
    report.blocks.append(Block("heading", "Collective bandwidth (commbench)"))
    add_figure(
        report.blocks,
        report.figures,
        "commbench",
        lambda: plots.commbench_curves(records),
        "Bus bandwidth vs message size per collective and world size.",
    )
