"""The campaign beside a study's published breakdown (`ddlbench report --reference`): the matching cells,
the overlay figure, the report's reference section.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from analysis.figures import finish, model_key, panels, paper_style, pretty
from analysis.palette import BREAKDOWN_COLORS, PAPER_RC
from analysis.report_blocks import Block, Report, add_figure, table_if_rows

# seed study A's parts, bottom to top (the order of breakdown_bars): (legend name, colour, reference column);
# the rest up to 100% is its "other work"
REFERENCE_PARTS = [
    ("data", "data", "data_pct"),
    ("compute", "compute", "compute_pct"),
    ("allreduce", "allreduce (exposed)", "allreduce_pct"),
]

# this campaign's markers: the top of each stacked part (report.reference_comparison), one shape per part
REFERENCE_MARKERS = [
    ("data", "data_top_pct", "o"),
    ("compute", "compute_top_pct", "s"),
    ("exposed allreduce", "allreduce_top_pct", "D"),
]

# one fill per configuration of the campaign where several match one reference cell (greyscale-safe)
_SERIES_FILLS = ["#000000", "#0072B2", "#CC79A7", "#009E73", "#F0E442", "#FFFFFF"]
_NO_MATCH = "no cell of this campaign matches a reference cell (model, loader, GPUs)"


@paper_style
def reference_breakdown(
    reference: pd.DataFrame, *, ours: pd.DataFrame | None = None, source: str = "aach2023"
) -> Figure:
    """The seed study's DDP breakdown (% of runtime) as stacked bars (data, compute, allreduce, the rest),
    one panel per model x loader. `ours` (report.reference_comparison: one row per matching DDP cell,
    `gpus`, `series` and the stacked tops *_top_pct, defined like the seed's parts) adds a marker at the top
    of each part, so that markers and bars read alike; several configurations per reference cell get a
    fill each, side by side within the bar. An empty `ours` means no cell matches: the title says so.
    Everything stays inside the axes (0..100% plus headroom, clipped), below the panel titles."""
    combos = sorted(reference.groupby(["model", "loader"]).groups, key=lambda c: (model_key(c[0]), c[1]))
    fig, axes = panels(len(combos), row_height_in=2.1, sharey=True)
    series = list(dict.fromkeys(ours["series"])) if ours is not None and not ours.empty else []  # table order
    marked = ours if series else pd.DataFrame(columns=["model", "loader", "gpus", "series"])
    fills = (
        {name: _SERIES_FILLS[i % len(_SERIES_FILLS)] for i, name in enumerate(series)}
        if len(series) > 1
        else {name: "white" for name in series}
    )
    offsets = {name: (i - (len(series) - 1) / 2) * 0.5 / max(1, len(series) - 1) for i, name in enumerate(series)}
    for ax, (model, loader) in zip(axes, combos):
        rows = reference[(reference["model"] == model) & (reference["loader"] == loader)].sort_values("gpus")
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for label, color, column in REFERENCE_PARTS:
            values = rows[column].to_numpy(float)
            ax.bar(
                x, values, 0.75, bottom=bottom, color=BREAKDOWN_COLORS[color], label=f"{label} ({source})", linewidth=0
            )
            bottom += values
        ax.bar(
            x,
            100 - bottom,
            0.75,
            bottom=bottom,
            color=BREAKDOWN_COLORS["other"],
            label=f"other ({source})",
            linewidth=0,
        )
        mine = marked[(marked["model"] == model) & (marked["loader"] == loader)]
        position = {int(g): i for i, g in enumerate(rows["gpus"])}
        for name, cell in mine.groupby("series", sort=True):
            xs = cell["gpus"].astype(int).map(position).to_numpy(float) + offsets[name]
            for part, column, marker in REFERENCE_MARKERS:
                ax.plot(
                    xs,
                    cell[column].to_numpy(float),
                    linestyle="none",
                    marker=marker,
                    markersize=4,
                    markerfacecolor=fills[name],
                    markeredgecolor="black",
                    markeredgewidth=0.8,
                    zorder=5,
                    label=f"top of {part} (this campaign)" if len(series) == 1 else "_cell",
                )
        if not mine.empty and len(series) > 1:  # legend: one shape per part, one fill per configuration
            for part, _, marker in REFERENCE_MARKERS:
                ax.plot(
                    [],
                    [],
                    linestyle="none",
                    marker=marker,
                    markerfacecolor="white",
                    markeredgecolor="black",
                    label=f"top of {part} (this campaign)",
                )
            for name in series:
                ax.plot(
                    [],
                    [],
                    linestyle="none",
                    marker="o",
                    markersize=6,
                    markerfacecolor=fills[name],
                    markeredgecolor="black",
                    markeredgewidth=0.8,
                    label=name,
                )
        ax.set_xticks(x, [str(g) for g in rows["gpus"]], rotation=90)
        ax.set_xlabel("GPUs")
        ax.set_ylim(0, 108)  # headroom: a marker at 100% is drawn whole, inside the axes
        ax.set_yticks(range(0, 101, 20))
        ax.yaxis.set_major_formatter(PercentFormatter())
        ax.set_title(f"{model}, {pretty(loader)}")
        ax.set_ylabel("% of runtime")
    title = f"PyTorch-DDP time breakdown: {source} (bars)"
    if ours is not None:
        title += ", this campaign's DDP cells (markers)" if series else f"\n{_NO_MATCH}"
    fig = finish(fig, axes, title=title, xlabel_in=0.6, legend_cols=3)
    extra_in = 0.2 * title.count("\n")  # finish leaves room for one title line: move the panels down
    if extra_in:
        height = fig.get_figheight()
        top_in, bottom_in = (1 - fig.subplotpars.top) * height, fig.subplotpars.bottom * height
        height += extra_in
        fig.set_figheight(height)
        fig.subplots_adjust(top=1 - (top_in + extra_in) / height, bottom=bottom_in / height)
        fig.suptitle(title, fontsize=PAPER_RC["axes.titlesize"] + 1, y=1 - 0.08 / height, va="top")
    return fig


# Seed study A's breakdown (aach2023): AllReduce, data and compute are stacked as parts of one runtime (they sum
# below 100; the rest is other work). ddlbench's parts alike (analysis/reference/README.md): exposed allreduce
# (communication not hidden behind compute; the total overlaps backward and would count that time twice), data
# (waiting for the batch), compute without exposed allreduce, and other (step minus the three) kept apart like
# the seed's rest (its compute is cuDNN time, not the rest of the step).
REFERENCE_KEY = ["model", "loader", "gpus"]

REFERENCE_SIDES = [  # (reference column, this campaign's share column, its name here); tables add _ref / _here
    ("allreduce_pct", "allreduce_exposed_share", "allreduce_exposed_pct"),
    ("data_pct", "data_share", "data_pct"),
    ("compute_pct", "compute_share", "compute_pct"),
    ("other_pct", "other_share", "other_pct"),
]

_REFERENCE_CONFIG = ["precision", "per_gpu_batch", "num_nodes", "variant"]  # what tells matching cells apart

_REFERENCE_TABLE = [
    *REFERENCE_KEY,
    *_REFERENCE_CONFIG,
    *(name for ref, _, here in REFERENCE_SIDES for name in (f"{ref}_ref", f"{here}_here")),
]


def reference_comparison(reference: pd.DataFrame, shares: pd.DataFrame | None) -> pd.DataFrame:
    """One row per DDP cell of this campaign whose (model, loader, GPU count) is a reference cell, in % of
    step time: the reference's parts (*_ref, other_pct_ref = the rest up to 100) beside this cell's, defined
    alike (*_here, REFERENCE_SIDES), plus the tops of this cell's parts stacked in the figure's order
    (data_top_pct, compute_top_pct, allreduce_top_pct = 100 - other), so that markers and bars read alike
    and no stack passes 100%. Several cells can match one reference cell (another precision, batch, node
    count or variant): each keeps its row, and `series` names what tells them apart ('' when nothing
    does). Where a run did not time its allreduce (framework.comm_timer off) that time is inside
    compute: allreduce_exposed_pct_here and compute_pct_here are left empty, allreduce_top_pct is still
    the top of the two."""
    columns = [*_REFERENCE_TABLE, "series", "data_top_pct", "compute_top_pct", "allreduce_top_pct"]
    if shares is None or shares.empty:
        return pd.DataFrame(columns=columns)
    ref = reference.assign(other_pct=100 - reference[["allreduce_pct", "data_pct", "compute_pct"]].sum(axis=1))
    ddp = shares[shares["framework"] == "ddp"].rename(columns={"world_size": "gpus"})
    side = ref.merge(ddp.assign(gpus=ddp["gpus"].astype(int)), on=REFERENCE_KEY)
    if side.empty:
        return pd.DataFrame(columns=columns)
    timed = side["allreduce_exposed_share"].notna()
    here = {shown: 100 * side[share].astype("float64") for _, share, shown in REFERENCE_SIDES}
    here["compute_pct"] = here["compute_pct"].where(timed)
    out = side[[c for c in [*REFERENCE_KEY, *_REFERENCE_CONFIG] if c in side]].copy()
    for ref_column, _, shown in REFERENCE_SIDES:
        out[f"{ref_column}_ref"], out[f"{shown}_here"] = side[ref_column].astype("float64"), here[shown]
    varying = [c for c in _REFERENCE_CONFIG if c in out and out[c].fillna("").astype(str).nunique() > 1]
    out["series"] = (
        [
            ", ".join(_series_part(c, v) for c, v in zip(varying, values))
            for values in out[varying].itertuples(index=False)
        ]
        if varying
        else ""
    )
    out["data_top_pct"] = here["data_pct"]
    out["compute_top_pct"] = here["data_pct"] + here["compute_pct"]
    out["allreduce_top_pct"] = here["data_pct"] + 100 * side["compute_share"] + here["allreduce_exposed_pct"].fillna(0)
    out = out.sort_values([c for c in [*REFERENCE_KEY[1:], *_REFERENCE_CONFIG] if c in out]).sort_values(
        "model", key=lambda m: m.map(model_key), kind="stable"
    )
    return out.reindex(columns=[c for c in columns if c in out]).reset_index(drop=True)


def _series_part(column: str, value: object) -> str:
    """How a setting that tells matching cells apart reads in the figure's legend."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) or value == "":
        return f"no {column}"
    text = f"{value:g}" if isinstance(value, (int, float, np.integer, np.floating)) else str(value)
    if column == "per_gpu_batch":
        return f"b{text}"
    if column == "num_nodes":
        return f"{text} node{'s' if text != '1' else ''}"
    return text


def reference_section(
    blocks: list[Block], figures: dict, reference: pd.DataFrame, reference_name: str, shares: pd.DataFrame | None
) -> None:
    """The reference overlay: its breakdown with this campaign's matching DDP cells defined and stacked
    alike (reference_comparison), and the two side by side; says in words when no cell matches. `shares`:
    breakdown cells, None when no run was counted."""
    side = reference_comparison(reference, shares)
    num_ddp = 0 if shares is None or shares.empty else int((shares["framework"] == "ddp").sum())
    blocks.append(Block("heading", f"Compared with {reference_name}"))
    blocks.append(
        Block(
            "text",
            (
                f"{reference_name} gives PyTorch-DDP's AllReduce, data (I/O) and compute (cuDNN) in % of runtime as parts "
                "of one runtime, stacked (they sum below 100; the rest is other work). This campaign's DDP cells are "
                "compared alike: exposed allreduce (communication not hidden behind compute; the total overlaps "
                "backward, so stacked on compute it counts that time twice), data (waiting for the next batch), "
                "compute without the exposed allreduce, and other (the rest of the step) kept apart like the "
                "reference's rest. A cell matches when model, loader and GPU count are equal; several cells matching "
                "one reference cell (another precision, batch, node count or variant) are each shown."
            ),
        )
    )
    if side.empty:
        blocks.append(
            Block(
                "text",
                f"No cell of this campaign matches a reference cell (model, loader, GPUs): "
                f"{num_ddp} PyTorch-DDP cell(s), none at a model, loader and GPU count of "
                f"{reference_name}; the figure shows the reference alone.",
            )
        )
    configurations = side["series"].nunique() if not side.empty else 0
    caption = (
        f"PyTorch-DDP time breakdown from {reference_name} (bars, bottom to top: data, compute, allreduce, "
        "the rest up to 100%: other work). "
    )
    if side.empty:
        caption += "No cell of this campaign matches a reference cell (model, loader, GPUs): no markers."
    else:
        caption += (
            "Markers: this campaign's matching DDP cells, stacked the same way: tops of data, of compute "
            "(without exposed allreduce) and of exposed allreduce; from there to 100% is ddlbench's other. "
            "A missing compute marker: that run did not time its allreduce, so it is inside compute."
        )
        if configurations > 1:
            caption += f" {configurations} configurations match: one fill each (legend), side by side within the bar."
    add_figure(
        blocks,
        figures,
        f"reference_{reference_name}",
        lambda: reference_breakdown(reference, ours=side, source=reference_name),
        caption,
    )
    shown = [c for c in _REFERENCE_TABLE if c in side and (c != "variant" or side[c].fillna("").astype(bool).any())]
    if not side.empty:
        blocks.append(
            Block("text", f"{len(side)} of {num_ddp} PyTorch-DDP cells match a reference cell; one row each.")
        )
    table_if_rows(
        blocks,
        side[shown],
        (
            f"*_ref: {reference_name} (other_pct_ref: the rest up to 100); *_here: this campaign, mean over repeats, "
            "in % of step time. allreduce_exposed_pct_here and compute_pct_here are empty where the run did not time "
            "its allreduce (framework.comm_timer off, the default on GPUs): that time is then inside compute."
        ),
        key=tuple(name for ref, _, here in REFERENCE_SIDES for name in (f"{ref}_ref", f"{here}_here")),
    )


def draw(report: Report) -> None:
    if report.reference is not None:
        shares = report.shares if report.measured else None
        reference_section(report.blocks, report.figures, report.reference, report.reference_name, shares)
