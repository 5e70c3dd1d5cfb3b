"""Telemetry timelines of the runs with the most GPUs."""

from __future__ import annotations

import pandas as pd

from analysis import plots
from analysis.sections.base import Block, Report, add_figure

MAX_TELEMETRY_FIGURES = 2  # a timeline per run: a few are readable, hundreds are not


def draw(report: Report) -> None:
    telemetry, runs = report.campaign.telemetry, report.campaign.runs
    if telemetry.empty or "t_s" not in telemetry:
        return
    report.blocks.append(Block("heading", "Telemetry"))
    # the runs with the most GPUs first: that is where stragglers and stalls show
    sizes = runs.set_index("run_id")["world_size"] if "world_size" in runs else pd.Series(dtype="float64")
    chosen = sorted(telemetry["run_id"].unique(), key=lambda r: (-float(sizes.get(r, 0) or 0), r))
    if len(chosen) > MAX_TELEMETRY_FIGURES:
        report.blocks.append(
            Block(
                "text",
                f"{len(chosen)} runs have telemetry; timelines of the "
                f"{MAX_TELEMETRY_FIGURES} with the most GPUs are shown.",
            )
        )
    for i, run_id in enumerate(chosen[:MAX_TELEMETRY_FIGURES]):
        add_figure(
            report.blocks,
            report.figures,
            f"telemetry_{i}",
            lambda run_id=run_id: plots.telemetry_timeline(telemetry, run_id=run_id),
            f"Telemetry of {run_id}.",
        )
