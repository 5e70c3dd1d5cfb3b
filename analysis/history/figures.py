"""A series over time: each run's value as a point, each campaign's mean as a line, the changes marked, one
panel per cell (series). Drawing only, with analysis/figures.py's helpers; the numbers come from trend.py."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import finish, panels
from analysis.history.trend import CHANGE

MAX_PANELS = 12  # a page of panels; the table lists every series


def series_over_time(runs: pd.DataFrame, changes: pd.DataFrame, *, value: str, label: str) -> Figure:
    """Per series (changes' `series`): its runs' `value` against their start date, its campaigns' means
    joined, a change drawn as a red ring on its campaign with the step in percent."""
    names = list(dict.fromkeys(changes["series"]))[:MAX_PANELS]
    fig, axes = panels(len(names), ncols=2 if len(names) > 1 else 1, row_height_in=2.2)
    key = runs["series_hash"].fillna(runs["cell_hash"])
    for ax, series in zip(axes, names):
        points = runs[key == series]
        rows = changes[changes["series"] == series]
        ax.plot(pd.to_datetime(points["started_s"], unit="s"), points[value], "o", ms=3, color="#777", label="run")
        dates = pd.to_datetime(rows["started_s"], unit="s")
        ax.plot(dates, rows["mean"], "-", color="#1f77b4", lw=1.2, label="campaign mean")
        changed = rows["verdict"] == CHANGE
        ax.plot(
            dates[changed], rows.loc[changed, "mean"], "o", ms=9, mfc="none", mec="#d62728", mew=1.5, label="change"
        )
        for date, row in zip(dates[changed], rows[changed].itertuples()):
            ax.annotate(
                f"{row.change_pct:+.0f}% ({row.campaign})",
                (date, row.mean),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
                color="#d62728",
            )
        ax.set_title(str(rows["label"].iloc[0]), fontsize=8)
        ax.set_ylabel(label)
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        ax.set_ylim(bottom=0)
    return finish(fig, axes, title=f"{label} over time", legend_cols=3)
