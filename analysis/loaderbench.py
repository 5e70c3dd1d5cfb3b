"""`ddlbench loaderbench`'s figure: each loader's samples/s against its workers."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from analysis.figures import finish, panels, paper_style, pretty
from analysis.palette import IDEAL_COLOR, loader_color, loader_style


@paper_style
def loaderbench_curves(measurements: pd.DataFrame) -> Figure:
    """Loader-alone img/s against CPU workers (or DALI threads), one curve per loader; the decode ceilings as
    reference lines: one CPU worker's rate times the workers (the most the native loader can reach) and the
    device's batched decode. Columns: case, workers, img_s (ddlbench loaderbench's records)."""
    fig, (ax,) = panels(1)
    loaders = measurements[~measurements["case"].isin(["cpu_decode", "device_decode"])]
    counts = sorted(loaders["workers"].dropna().unique())
    for case, rows in loaders.groupby("case", sort=False):
        rows = rows.sort_values("workers")
        style, marker = loader_style(str(case))
        ax.plot(rows["workers"], rows["img_s"], style, marker=marker, color=loader_color(str(case)), label=pretty(case))
    ceilings = measurements.set_index("case")["img_s"]
    if "cpu_decode" in ceilings and counts:
        ax.plot(
            counts, [ceilings["cpu_decode"] * c for c in counts], ":", color=IDEAL_COLOR, label="CPU decode x workers"
        )
    if "device_decode" in ceilings:
        ax.axhline(
            ceilings["device_decode"], linestyle="-.", color=IDEAL_COLOR, linewidth=1.0, label="device decode (batched)"
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(int(c)) for c in counts])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("CPU workers / threads per rank")
    ax.set_ylabel("images/s (loader alone)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}"))
    return finish(fig, [ax], legend_cols=2)
