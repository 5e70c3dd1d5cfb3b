"""The history page: per cell, its campaigns over time with the rule's verdicts, the changes with what
differs, the CI check's verdict and the figure; rendered as markdown and HTML by analysis/report.py (the
report's style) into a new folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.history.figures import series_over_time
from analysis.history.trend import CHANGE, check, check_lines
from analysis.report import fresh_dir, render_html, render_markdown, save_figures
from analysis.report_blocks import Block, add_figure

TABLE = [
    "label",
    "campaign",
    "date",
    "num_runs",
    "mean",
    "std",
    "verdict",
    "change_pct",
    "threshold_pct",
    "noise_from",
    "per_gpu_img_s",
    "efficiency",
    "mfu",
    "energy_j_per_sample",
    "step_s_cv",
    "marks",
]


def blocks(runs: pd.DataFrame, changes: pd.DataFrame, *, value: str, rule: str) -> tuple[list[Block], dict]:
    """The page's blocks and figures (drawn later by save_figures)."""
    failures = check(changes)
    out = [Block("heading", "ddlbench history", 1)]
    out.append(
        Block(
            "text",
            f"{len(runs)} runs of {changes['series'].nunique()} cells in "
            f"{changes['campaign'].nunique()} campaigns, {str(runs['started'].min())[:10]} to "
            f"{str(runs['started'].max())[:10]}. {rule}",
        )
    )
    out.append(Block("heading", "Check: the newest campaign of each cell", 2))
    lines = check_lines(failures) or ["every cell's newest campaign is within its noise (or better)"]
    out += [Block("text", line) for line in lines]
    found = changes[changes["verdict"] == CHANGE]
    out.append(Block("heading", "Changes", 2))
    if found.empty:
        out.append(Block("text", "no change in any cell"))
    else:
        table = found[
            [
                "label",
                "campaign",
                "date",
                "mean",
                "reference",
                "reference_mean",
                "change_pct",
                "threshold_pct",
                "direction",
                "differs",
            ]
        ].rename(columns={"mean": value})
        out.append(
            Block(
                "table",
                table.round(1),
                note="change_pct: the campaign's mean against the reference's "
                "(the campaigns since the last change); threshold_pct: what the run-to-run noise allows",
            )
        )
    out.append(Block("heading", "Cells over time", 2))
    table = changes[[c for c in TABLE if c in changes]].rename(columns={"mean": f"{value}_mean", "std": f"{value}_std"})
    out.append(
        Block(
            "table",
            table.round(3),
            note="one row per cell and campaign, oldest first; medians over the "
            "campaign's runs beside the mean; verdict: the rule's (docs/history.md)",
        )
    )
    figures: dict = {}
    add_figure(
        out,
        figures,
        "history",
        lambda: series_over_time(runs, changes, value=value, label=value),
        f"{value} of each cell over time: runs (grey), campaign means (line), changes (red rings)",
    )
    return out, figures


def write_page(runs: pd.DataFrame, changes: pd.DataFrame, out: Path, *, value: str, rule: str) -> Path:
    """out/history.md, out/history.html and out/figures/ (out: a new or empty folder)."""
    out = fresh_dir(out, "--html")
    page, figures = blocks(runs, changes, value=value, rule=rule)
    files = save_figures(figures, out, ("png",), jobs=1)
    (out / "history.md").write_text(render_markdown(page, files))
    (out / "history.html").write_text(render_html(page, files, "ddlbench history"))
    return out / "history.html"
