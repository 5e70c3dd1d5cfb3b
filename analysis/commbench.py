"""`ddlbench commbench` results in the report: bus bandwidth against message size, the figure and the section."""

from __future__ import annotations

import matplotlib
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from analysis.figures import finish, panels, paper_style
from analysis.interconnect import GPU_TEST_OPS
from analysis.report_blocks import Block, Report, add_figure


@paper_style
def commbench_curves(commbench: pd.DataFrame) -> Figure:
    """Bus bandwidth vs message size (log x), one panel per operation swept over sizes, one curve per
    world size (and backend, where several were measured)."""
    data = commbench.dropna(subset=["op", "size_bytes", "busbw_gb_s"])
    swept = data.groupby("op")["size_bytes"].nunique()
    ops = sorted(swept[swept > 1].index)
    fig, axes = panels(max(1, len(ops)), sharey=True)
    keys = ["world_size", "backend"] if "backend" in data and data["backend"].nunique() > 1 else ["world_size"]
    curves = sorted(data[keys].drop_duplicates().itertuples(index=False, name=None))
    cmap = matplotlib.colormaps["viridis"]
    styles = ["-", "--", ":", "-."]
    backends = sorted(data["backend"].dropna().unique()) if "backend" in keys else []
    for ax, op in zip(axes, ops):
        for key in curves:
            mask = (data["op"] == op) & (data["world_size"] == key[0])
            if len(key) > 1:
                mask &= data["backend"] == key[1]
            rows = data[mask].groupby("size_bytes")["busbw_gb_s"].median().reset_index()
            if rows.empty:
                continue
            sizes = sorted(data["world_size"].unique())
            color = cmap(sizes.index(key[0]) / max(1, len(sizes) - 1) * 0.85)
            style = styles[backends.index(key[1]) % len(styles)] if len(key) > 1 else "-"
            label = f"{int(key[0])} ranks" + (f", {key[1]}" if len(key) > 1 else "")
            ax.plot(rows["size_bytes"], rows["busbw_gb_s"], style, marker=".", color=color, label=label)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(LogLocator(base=2**5))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(_bytes_label))
        ax.set_xlabel("message size")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(op)
    return finish(fig, axes)


def _bytes_label(value: float, _pos=None) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} B"


def draw(report: Report) -> None:
    records = report.campaign.commbench
    collectives = records[~records["op"].isin(GPU_TEST_OPS)]
    if collectives.empty or not collectives["busbw_gb_s"].notna().any():
        return
    report.blocks.append(Block("heading", "Collective bandwidth (commbench)"))
    add_figure(
        report.blocks,
        report.figures,
        "commbench",
        lambda: commbench_curves(records),
        "Bus bandwidth vs message size per collective and world size.",
    )
