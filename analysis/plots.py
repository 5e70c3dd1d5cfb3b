"""Figures: DataFrames in, matplotlib Figures out. Draw only: no metrics, no files (report.py saves).

Figures are built on matplotlib.figure.Figure (the Agg canvas, no pyplot state), sized for a paper
(7 in wide), with one palette (analysis/palette.py): colour = framework, line style = loader.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")  # never a window, even if pyplot gets imported elsewhere

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullLocator, PercentFormatter

from analysis.palette import (
    BREAKDOWN_COLORS,
    FULL_WIDTH_IN,
    HALF_WIDTH_IN,
    IDEAL_COLOR,
    PAPER_RC,
    STALL_COLORS,
    TRACE_COLORS,
    framework_color,
    loader_color,
    loader_style,
    schedule_color,
)

_NAMES = {
    "ddp": "PyTorch-DDP",
    "dp": "DataParallel",
    "fsdp": "FSDP2",
    "horovod": "Horovod",
    "deepspeed": "DeepSpeed",
    "native": "native",
    "dali": "DALI",
    "synthetic": "synthetic",
    "native_gpu": "native (GPU decode)",
    "dali-tfrecord": "DALI (TFRecord)",
}


def _paper(draw):
    """Draw inside the paper rcParams (artists read them when created; save inside them too)."""
    import functools

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(PAPER_RC):
            return draw(*args, **kwargs)

    return wrapper


def pretty(name: object) -> str:
    return _NAMES.get(str(name), str(name))


def _panels(
    num: int, *, ncols: int = 3, row_height_in: float = 2.0, width_in: float = FULL_WIDTH_IN, sharey: bool = False
) -> tuple[Figure, list]:
    """A grid of `num` panels; _finish() sizes the margins (a fixed layout: constrained layout
    costs more than the drawing itself on a campaign's worth of figures)."""
    if num == 1 and width_in == FULL_WIDTH_IN:
        width_in = HALF_WIDTH_IN + 0.6  # one panel: a single paper column, not a stretched page
    with matplotlib.rc_context(PAPER_RC):
        ncols = max(1, min(ncols, num))
        nrows = max(1, math.ceil(num / ncols))
        fig = Figure(figsize=(width_in, row_height_in * nrows))
        axes = fig.subplots(nrows, ncols, squeeze=False, sharey=sharey).ravel().tolist()
    for ax in axes[num:]:
        ax.set_visible(False)
    fig._ddl_grid = (nrows, ncols, row_height_in)
    return fig, axes[:num]


def _finish(
    fig: Figure,
    axes: list,
    *,
    title: str | None = None,
    legend_cols: int = 4,
    xlabel_in: float = 0.45,
    left_in: float = 0.62,
) -> Figure:
    """One legend for the figure below the panels, a title above, margins in inches."""
    handles: dict = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if not label.startswith("_"):
                handles.setdefault(label, handle)
    # stacked parts (patches) first, in stacking order; markers and lines after them
    handles = dict(sorted(handles.items(), key=lambda item: isinstance(item[1], Line2D)))
    for ax in axes:  # with a shared y axis, one y label per row
        if ax.get_shared_y_axes().get_siblings(ax) != [ax] and not ax.get_subplotspec().is_first_col():
            ax.set_ylabel("")
    nrows, ncols, row_height_in = fig._ddl_grid
    legend_rows = math.ceil(len(handles) / legend_cols) if handles else 0
    legend_in = 0.08 + 0.17 * legend_rows
    title_in = 0.3 if title else 0.0
    top_in = 0.28 + title_in
    height = nrows * row_height_in + legend_in + xlabel_in + top_in
    width = fig.get_figwidth()
    fig.set_figheight(height)
    hspace_in, wspace_in = xlabel_in + 0.35, 0.55
    axes_h = (nrows * row_height_in - (nrows - 1) * hspace_in) / nrows
    axes_w = (width - left_in - 0.15 - (ncols - 1) * wspace_in) / ncols
    fig.subplots_adjust(
        left=left_in / width,
        right=1 - 0.15 / width,
        top=1 - top_in / height,
        bottom=(legend_in + xlabel_in) / height,
        hspace=hspace_in / max(axes_h, 0.1),
        wspace=wspace_in / max(axes_w, 0.1),
    )
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="lower center",
            bbox_to_anchor=(0.5, 0.0),
            ncols=min(legend_cols, len(handles)),
            fontsize=PAPER_RC["legend.fontsize"],
            frameon=False,
            handlelength=2.6,
            columnspacing=1.2,
        )
    if title:
        fig.suptitle(title, fontsize=PAPER_RC["axes.titlesize"] + 1, y=1 - 0.08 / height, va="top")
    return fig


def _model_key(name: str) -> tuple:
    """resnet50 < resnet101 < resnet152: natural order, not text order."""
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name)))


def _models(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["model"].dropna().unique(), key=_model_key)


def _gpu_axis(ax, values, *, log_y: bool = False) -> None:
    """GPU counts are powers of two: a log2 x axis labelled with the counts themselves."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(v) for v in values})
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("GPUs")
    if log_y:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: readable_tick(v)))
        ax.yaxis.set_minor_locator(NullLocator())


def readable_tick(value: float) -> str:
    """A log axis's tick as a number a reader can place: whole numbers from 100 up (1,250), three
    significant digits below (5.5, 0.25), so that a narrow range's ticks never print the same label."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


# curves that share a framework and a loader (colour and line style) differ in their marker
VARIANT_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">"]


def _series(frame: pd.DataFrame, *, curve: str = "group_hash"):
    """(framework, loader, label, marker, line rows, extra rows) per curve: one curve per scaling group
    (one configuration at every size), labelled with what tells it apart from the panel's other curves.
    The line runs through the fewest nodes at each GPU count; other node layouts are `extra` points."""
    if curve not in frame:
        frame = frame.assign(**{curve: frame[["framework", "loader"]].astype("string").agg("/".join, axis=1)})
    batch = "global_batch" if curve == "strong_group_hash" else "per_gpu_batch"  # the one a curve holds
    firsts = frame.groupby(curve, sort=False).first()
    varying = [c for c in ("precision", batch) if c in firsts and firsts[c].nunique() > 1]
    drawn: dict[tuple, int] = {}
    for _, rows in sorted(frame.groupby(curve, sort=False), key=lambda g: _curve_order(g[1], varying)):
        first = rows.iloc[0]
        label = f"{pretty(first['framework'])}, {pretty(first['loader'])}"
        label += "".join(f", {_SHORT.get(c, c)}{first[c]}" for c in varying)
        if "variant" in rows and first["variant"]:
            label += f" [{first['variant']}]"
        rows = rows.sort_values(["world_size", "num_nodes"])
        line = rows.drop_duplicates("world_size")
        seen = drawn.setdefault((first["framework"], first["loader"]), 0)
        drawn[(first["framework"], first["loader"])] += 1
        marker = loader_style(first["loader"])[1] if seen == 0 else VARIANT_MARKERS[seen % len(VARIANT_MARKERS)]
        yield first["framework"], first["loader"], label, marker, line, rows.drop(line.index)


def _legend_cols(axes: list) -> int:
    """As many legend columns as the longest label leaves room for on a page's width."""
    longest = max((len(label) for ax in axes for label in ax.get_legend_handles_labels()[1]), default=0)
    return 4 if longest <= 24 else 2 if longest <= 48 else 1


_SHORT = {"precision": "", "per_gpu_batch": "b", "global_batch": "B", "variant": "", "pair": ""}


def _pair_variant(cells: pd.DataFrame) -> pd.Series:
    """A cell's variant without the loader's and the data's own settings: what a DALI cell and its native
    partner share."""
    return (
        cells["variant"]
        .fillna("")
        .map(lambda v: ", ".join(p for p in v.split(", ") if p and not p.startswith(("loader.", "data."))))
    )


def _curve_order(rows: pd.DataFrame, varying: list[str]) -> tuple:
    first = rows.iloc[0]
    return (
        str(first["framework"]),
        str(first["loader"]),
        *(str(first[c]) for c in varying),
        str(first.get("variant", "")),
    )


def _extra_points(ax, extra: pd.DataFrame, y_column: str, *, color: str, marker: str, scale: float = 1.0) -> None:
    """Other node layouts of a curve's GPU counts: hollow markers, so that no cell is hidden."""
    if not extra.empty:
        ax.plot(
            extra["world_size"],
            scale * extra[y_column],
            linestyle="none",
            marker=marker,
            markerfacecolor="white",
            color=color,
            label="_other node layout",
        )


@_paper
def throughput_vs_gpus(cells: pd.DataFrame) -> Figure:
    """Throughput (img/s) vs GPUs, log-log, one panel per model, one curve per framework x loader, each
    with its ideal (linear) line from its smallest GPU count; error bars are the repeat CI if present."""
    models = _models(cells)
    fig, axes = _panels(len(models))
    for ax, model in zip(axes, models):
        rows_m = cells[cells["model"] == model]
        for framework, loader, label, marker, rows, extra in _series(rows_m):
            style = loader_style(loader)[0]
            color = framework_color(framework)
            x, y = rows["world_size"].to_numpy(float), rows["throughput_img_s"].to_numpy(float)
            _extra_points(ax, extra, "throughput_img_s", color=color, marker=marker)
            if "throughput_img_s_ci_low" in rows and rows["throughput_img_s_ci_low"].notna().any():
                err = np.vstack(
                    [
                        y - rows["throughput_img_s_ci_low"].fillna(pd.Series(y, index=rows.index)),
                        rows["throughput_img_s_ci_high"].fillna(pd.Series(y, index=rows.index)) - y,
                    ]
                )
                ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt="none", ecolor=color, elinewidth=0.8, capsize=2)
            ax.plot(x, y, style, marker=marker, color=color, label=label)
            ax.plot(x, y[0] * x / x[0], color=color, linestyle=(0, (1, 2)), linewidth=0.8, alpha=0.6, label="_ideal")
        ax.plot([], [], color=IDEAL_COLOR, linestyle=(0, (1, 2)), linewidth=0.8, label="ideal (linear)")
        _gpu_axis(ax, rows_m["world_size"], log_y=True)
        low, high = ax.get_ylim()
        if high / low < 8:  # less than a decade: 1-2-5 ticks would leave one label
            ax.yaxis.set_major_locator(MaxNLocator(5))
        ax.set_title(model)
        ax.set_ylabel(f"throughput ({_rate(rows_m)})")
    return _finish(fig, axes, legend_cols=_legend_cols(axes))


def _rate(rows: pd.DataFrame) -> str:
    """The throughput unit of one panel's cells (their sample_unit, images where the table has none)."""
    from benchmarks.models.configs import RATE_LABELS

    units = sorted(set(rows["sample_unit"].dropna().astype(str))) if "sample_unit" in rows else []
    if len(units) > 1:  # one axis never mixes units: callers split by sample_unit first
        raise ValueError(f"one panel holds cells of several sample units ({', '.join(units)})")
    unit = units[0] if units else "images"
    return RATE_LABELS.get(unit, f"{unit}/s")


@_paper
def efficiency_vs_gpus(scaled: pd.DataFrame) -> Figure:
    """Scaling efficiency (%) vs GPUs, one panel per model, one curve per framework x loader."""
    models = _models(scaled)
    fig, axes = _panels(len(models), sharey=True)
    for ax, model in zip(axes, models):
        rows_m = scaled[scaled["model"] == model]
        mode = scaled["scaling"].iloc[0] if "scaling" in scaled else "weak"
        curve = "strong_group_hash" if mode == "strong" else "group_hash"
        for framework, loader, label, marker, rows, extra in _series(rows_m, curve=curve):
            style = loader_style(loader)[0]
            if rows["efficiency"].notna().sum() == 0:
                continue  # a configuration at one GPU count: no baseline, no efficiency
            ax.plot(
                rows["world_size"],
                100 * rows["efficiency"],
                style,
                marker=marker,
                color=framework_color(framework),
                label=label,
            )
            _extra_points(ax, extra, "efficiency", color=framework_color(framework), marker=marker, scale=100)
        ax.axhline(100, color=IDEAL_COLOR, linewidth=0.8, linestyle=(0, (1, 2)))
        _gpu_axis(ax, rows_m["world_size"])
        top = np.nanmax([110.0, *(100 * rows_m["efficiency"].dropna() + 5)])
        ax.set_ylim(0, top)
        ax.yaxis.set_major_formatter(PercentFormatter())
        baselines = sorted({int(b) for b in rows_m["baseline_gpus"].dropna()}) if "baseline_gpus" in rows_m else []
        base = (
            f"vs {', '.join(map(str, baselines))} GPU{'s' if baselines != [1] else ''}"
            if baselines
            else "no smaller GPU count: no efficiency"
        )
        ax.set_title(f"{model} ({mode} scaling, {base})")
        ax.set_ylabel("efficiency")
    return _finish(fig, axes, legend_cols=_legend_cols(axes))


BREAKDOWN_PARTS = [
    ("data", "data_share"),
    ("compute", "compute_share"),
    ("allreduce (exposed)", "allreduce_exposed_share"),
    ("other", "other_share"),
]


@_paper
def breakdown_bars(shares: pd.DataFrame, *, model: str) -> Figure:
    """Stacked time shares per GPU count for one model: one panel per framework x loader. The black
    tick marks the total allreduce (overlapped or not) where it was measured."""
    rows_m = shares[shares["model"] == model]
    combos = list(rows_m.groupby(["framework", "loader"]).groups)
    fig, axes = _panels(len(combos), row_height_in=2.2, sharey=True)
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
        ax.set_xticks(x, _cell_labels(rows), fontsize=7 if len(rows) > rows["world_size"].nunique() else None)
        ax.set_xlabel("GPUs")
        ax.set_ylim(0, 100)
        ax.yaxis.set_major_formatter(PercentFormatter())
        ax.set_title(f"{pretty(framework)}, {pretty(loader)}", color=framework_color(framework))
        ax.set_ylabel("share of step time")
    return _finish(fig, axes, title=f"Time breakdown, {model}")


def _cell_labels(rows: pd.DataFrame) -> list[str]:
    """A bar's label: its GPU count, and where several cells share one, their node count and variant."""
    shared = rows["world_size"].duplicated(keep=False).to_numpy()
    labels = []
    for is_shared, (_, row) in zip(shared, rows.iterrows()):
        label = f"{row['world_size']}"
        if is_shared:
            variant = str(row.get("variant") or "")
            label += f"\n{row['num_nodes']} node(s)" + (f"\n{variant.replace(' ', chr(10))}" if variant else "")
        labels.append(label)
    return labels


# the trace window's classes, bottom to top: (legend name, column of the step-time denominator, of the
# runtime one or None where that denominator has no such part)
TRACE_PARTS = [
    ("start-up", None, "startup_runtime_pct"),
    ("data", None, "data_runtime_pct"),
    ("cuDNN conv", "conv_pct", "conv_runtime_pct"),
    ("GEMM", "gemm_pct", None),
    ("other compute", "other_compute_pct", None),
    ("copies", "copies_pct", None),
    ("allreduce (exposed)", "allreduce_exposed_pct", "allreduce_exposed_runtime_pct"),
    ("other comm (exposed)", None, None),
    ("idle", "idle_pct", None),
]


@_paper
def trace_breakdown_bars(cells: pd.DataFrame) -> Figure:
    """Two panels, one bar per cell (label: framework, loader, model, GPUs, variant): the trace window's
    classes as shares of step time (left; they add to 100%), and the seed study's reading, shares of the
    whole runtime (right: start-up, data, cuDNN convolution, exposed allreduce; the rest is other work)."""
    rows = cells.reset_index(drop=True)
    labels = [
        f"{pretty(r.framework)} {pretty(r.loader)} {r.model} {r.world_size} GPU"
        + (f" [{r.variant}]" if isinstance(getattr(r, "variant", ""), str) and r.variant else "")
        for r in rows.itertuples(index=False)
    ]
    height = max(1.8, 0.28 * len(rows) + 1.2)
    fig = Figure(figsize=(FULL_WIDTH_IN, height))
    left, right = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(rows))
    rest = rows["comm_exposed_pct"].fillna(0) - rows["allreduce_exposed_pct"].fillna(0)
    for ax, which in ((left, 1), (right, 2)):
        start = np.zeros(len(rows))
        for name, step_col, runtime_col in TRACE_PARTS:
            if which == 1:
                values = (
                    rest.clip(lower=0).to_numpy(float)
                    if name == "other comm (exposed)"
                    else (rows[step_col].to_numpy(float) if step_col else None)
                )
            else:
                values = rows[runtime_col].to_numpy(float) if runtime_col else None
            if values is None:
                continue
            values = np.nan_to_num(values)
            ax.barh(y, values, 0.7, left=start, color=TRACE_COLORS[name], label=name, linewidth=0)
            start += values
        if which == 2:
            ax.barh(
                y,
                np.clip(100 - start, 0, None),
                0.7,
                left=start,
                color=TRACE_COLORS["rest"],
                label="rest (other work)",
                linewidth=0,
            )
        ax.set_xlim(0, 100)
        ax.xaxis.set_major_formatter(PercentFormatter())
        ax.set_xlabel("share of step time (trace window)" if which == 1 else "share of runtime (start-up included)")
    left.set_yticks(y, labels)
    left.invert_yaxis()
    handles, names = {}, []
    for ax in (left, right):
        for handle, name in zip(*ax.get_legend_handles_labels()):
            if name not in handles:
                handles[name] = handle
                names.append(name)
    fig.legend(
        [handles[n] for n in names], names, loc="lower center", ncols=min(5, len(names)), bbox_to_anchor=(0.5, 1.0)
    )
    fig.suptitle("Where the time goes, from the trace window", y=1.08)
    return fig


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


@_paper
def reference_breakdown(
    reference: pd.DataFrame, *, ours: pd.DataFrame | None = None, source: str = "aach2023"
) -> Figure:
    """The seed study's DDP breakdown (% of runtime) as stacked bars (data, compute, allreduce, the rest),
    one panel per model x loader. `ours` (report.reference_comparison: one row per matching DDP cell,
    `gpus`, `series` and the stacked tops *_top_pct, defined like the seed's parts) adds a marker at the top
    of each part, so that markers and bars read alike; several configurations per reference cell get a
    fill each, side by side within the bar. An empty `ours` means no cell matches: the title says so.
    Everything stays inside the axes (0..100% plus headroom, clipped), below the panel titles."""
    combos = sorted(reference.groupby(["model", "loader"]).groups, key=lambda c: (_model_key(c[0]), c[1]))
    fig, axes = _panels(len(combos), row_height_in=2.1, sharey=True)
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
    fig = _finish(fig, axes, title=title, xlabel_in=0.6, legend_cols=3)
    extra_in = 0.2 * title.count("\n")  # _finish leaves room for one title line: move the panels down
    if extra_in:
        height = fig.get_figheight()
        top_in, bottom_in = (1 - fig.subplotpars.top) * height, fig.subplotpars.bottom * height
        height += extra_in
        fig.set_figheight(height)
        fig.subplots_adjust(top=1 - (top_in + extra_in) / height, bottom=bottom_in / height)
        fig.suptitle(title, fontsize=PAPER_RC["axes.titlesize"] + 1, y=1 - 0.08 / height, va="top")
    return fig


@_paper
def dali_vs_native(cells: pd.DataFrame) -> Figure:
    """DALI throughput / native throughput vs GPUs, one panel per model, one curve per framework (and per
    precision, batch and non-loader variant where those differ): a DALI cell is paired with the native
    cell that has the same settings apart from the loader's own."""
    frame = cells.assign(pair=_pair_variant(cells)) if "variant" in cells else cells.assign(pair="")
    pair = ["model", "framework", "precision", "per_gpu_batch", "pair", "world_size", "num_nodes"]
    pair = [c for c in pair if c in frame]
    sides = {loader: frame[frame["loader"] == loader].set_index(pair) for loader in ("dali", "native")}
    joined = sides["dali"][["throughput_img_s"]].merge(
        sides["native"][["throughput_img_s"]],
        how="inner",
        left_index=True,
        right_index=True,
        suffixes=("_dali", "_native"),
    )
    joined = joined.assign(ratio=joined["throughput_img_s_dali"] / joined["throughput_img_s_native"]).reset_index()
    ratio = joined.dropna(subset=["ratio"])
    models = _models(ratio) if not ratio.empty else ["(no DALI/native pairs)"]
    fig, axes = _panels(len(models))
    for ax, model in zip(axes, models):
        rows_m = ratio[ratio["model"] == model]
        curve = [c for c in ("framework", "precision", "per_gpu_batch", "pair") if c in rows_m]
        varying = [c for c in curve[1:] if rows_m[c].nunique() > 1]
        for key, rows in rows_m.groupby(curve, sort=True):
            key = dict(zip(curve, key))
            rows = rows.sort_values(["world_size", "num_nodes"]).drop_duplicates("world_size")
            label = pretty(key["framework"]) + "".join(f", {_SHORT.get(c, '')}{key[c]}" for c in varying)
            ax.plot(
                rows["world_size"], rows["ratio"], "-", marker="o", color=framework_color(key["framework"]), label=label
            )
        ax.axhline(1.0, color=IDEAL_COLOR, linewidth=0.8, linestyle=(0, (1, 2)))
        if not rows_m.empty:
            _gpu_axis(ax, rows_m["world_size"])
        ax.set_title(model)
        ax.set_ylabel("DALI / native throughput")
    return _finish(fig, axes)


@_paper
def framework_by_depth(cells: pd.DataFrame) -> Figure:
    """Per-GPU throughput of each framework x loader per model, at each GPU count that has several
    models (one panel per GPU count): how the ranking moves with model depth."""
    frame = cells[cells["loader"] != "synthetic"]
    frame = frame.sort_values(["num_nodes"]).drop_duplicates(  # one node layout per GPU count: the fewest nodes
        [
            c
            for c in ["framework", "loader", "model", "precision", "per_gpu_batch", "variant", "world_size"]
            if c in frame
        ]
    )
    counts = frame.groupby("world_size")["model"].nunique()
    sizes = sorted(counts[counts >= 2].index) or sorted(frame["world_size"].unique())[-1:]
    fig, axes = _panels(len(sizes), row_height_in=2.3)
    keys = [c for c in ["framework", "loader", "precision", "per_gpu_batch", "variant"] if c in frame]
    varying = [c for c in keys[2:] if frame[c].nunique() > 1]
    series = sorted(frame.groupby(keys).groups)  # one bar series per configuration but the model
    width = 0.8 / max(1, len(series))
    for ax, size in zip(axes, sizes):
        rows_s = frame[frame["world_size"] == size]
        models = _models(rows_s)
        x = np.arange(len(models))
        for i, key in enumerate(series):
            key = dict(zip(keys, key))
            mask = np.logical_and.reduce([rows_s[c] == v for c, v in key.items()])
            rows = rows_s[mask].set_index("model")
            values = rows["per_gpu_img_s"].reindex(models).to_numpy(float)
            label = f"{pretty(key['framework'])}, {pretty(key['loader'])}" + "".join(
                f", {_SHORT.get(c, '')}{key[c]}" for c in varying if key[c]
            )
            ax.bar(
                x + (i - (len(series) - 1) / 2) * width,
                values,
                width,
                color=framework_color(key["framework"]),
                hatch="////" if key["loader"] == "dali" else None,
                edgecolor="white",
                linewidth=0.3,
                label=label,
            )
        ax.set_xticks(x, models)
        ax.set_title(f"{size} GPUs")
        ax.set_ylabel(f"{_rate(frame)} per GPU")
        ax.grid(axis="x", visible=False)
    return _finish(fig, axes)


TELEMETRY_FIRST = [
    "gpu_util_percent",
    "gpu_util_pct",
    "gpu_mem_used_bytes",
    "gpu_mem_used_gb",
    "gpu_power_w",
    "power_w",
    "pcie_rx_bytes_s",
    "pcie_tx_bytes_s",
    "nvlink_rx_bytes_s",
    "cpu_percent",
    "cpu_util_pct",
    "proc_cpu_percent",
    "disk_read_bytes_s",
]
# identifiers, constants and running totals: not worth a timeline
_TELEMETRY_SKIP = {"t_s", "t_rel_s", "rank", "gpu", "local_rank", "pid", "disk_read_bytes"}


def _telemetry_metrics(rows: pd.DataFrame, limit: int) -> list[str]:
    numeric = [
        c
        for c in rows.columns
        if c not in _TELEMETRY_SKIP
        and not c.endswith("_total_bytes")
        and pd.api.types.is_numeric_dtype(rows[c])
        and rows[c].notna().any()
        and rows[c].nunique() > 1
    ]
    first = [c for c in TELEMETRY_FIRST if c in numeric]
    return (first + [c for c in numeric if c not in first])[:limit]


@_paper
def telemetry_timeline(telemetry: pd.DataFrame, *, run_id: str, max_metrics: int = 6) -> Figure:
    """Telemetry fields over time for one run: mean over ranks/GPUs with the min-max band. Samples of
    different ranks are not simultaneous, so they are binned at the median sampling period."""
    rows = telemetry[telemetry["run_id"] == run_id]
    metrics = _telemetry_metrics(rows, max_metrics)
    fig, axes = _panels(max(1, len(metrics)), ncols=2, row_height_in=1.6)
    if metrics:
        t = rows["t_s"].astype(float)
        t = t - t.min()  # Unix time or seconds since start: plotted from the run's first sample
        by_rank = rows["rank"] if "rank" in rows else pd.Series(0, index=rows.index)
        period = t.groupby(by_rank).diff().median()
        period = float(period) if period == period and period > 0 else 1.0
        bins = (t / period).round() * period
        grouped = rows[metrics].groupby(bins)
        mean, low, high = grouped.mean(), grouped.min(), grouped.max()
        for ax, metric in zip(axes, metrics):
            scale, unit = (1e-9, " (GB" + ("/s)" if metric.endswith("_s") else ")")) if "bytes" in metric else (1.0, "")
            ax.fill_between(
                mean.index,
                low[metric] * scale,
                high[metric] * scale,
                color="#0072B2",
                alpha=0.2,
                linewidth=0,
                label="min-max over ranks",
            )
            ax.plot(mean.index, mean[metric] * scale, color="#0072B2", label="mean over ranks")
            ax.set_title(metric.replace("_bytes_s", "").replace("_bytes", "") + unit)
            ax.set_xlabel("time since first sample (s)")
    return _finish(fig, axes, title=f"Telemetry: {run_id}")


@_paper
def step_timeline(jittery: pd.DataFrame, *, slow_factor: float) -> Figure:
    """Step time (slowest rank) over the measured steps of the runs that lose the most time to slow
    steps (metrics.jittery_runs): one panel per run, its median dashed, slow steps marked."""
    run_ids = list(dict.fromkeys(jittery["run_id"]))
    fig, axes = _panels(max(1, len(run_ids)), ncols=2, row_height_in=1.6)
    for ax, run_id in zip(axes, run_ids):
        rows = jittery[jittery["run_id"] == run_id].sort_values("step")
        step_ms, median_ms = rows["step_s"] * 1e3, float(rows["step_ms_median"].iloc[0])
        slow = step_ms > slow_factor * median_ms
        ax.plot(rows["step"], step_ms, color="#0072B2", linewidth=0.9, label="step time (slowest rank)")
        ax.axhline(median_ms, color=IDEAL_COLOR, linestyle="--", linewidth=0.8, label="median")
        ax.scatter(
            rows["step"][slow],
            step_ms[slow],
            s=9,
            color="#D55E00",
            zorder=3,
            label=f"slow (> {slow_factor:g} x median)",
        )
        ax.set_ylim(bottom=0)
        ax.set_title(f"{run_id}\n{rows['slow_time_pct'].iloc[0]:.1f}% of the time in slow steps", fontsize=7)
        ax.set_xlabel("step")
        ax.set_ylabel("ms")
    return _finish(fig, axes, title="Step-time stability")


@_paper
def commbench_curves(commbench: pd.DataFrame) -> Figure:
    """Bus bandwidth vs message size (log x), one panel per operation swept over sizes, one curve per
    world size (and backend, where several were measured)."""
    data = commbench.dropna(subset=["op", "size_bytes", "busbw_gb_s"])
    swept = data.groupby("op")["size_bytes"].nunique()
    ops = sorted(swept[swept > 1].index)
    fig, axes = _panels(max(1, len(ops)), sharey=True)
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
    return _finish(fig, axes)


def _bytes_label(value: float, _pos=None) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= scale:
            return f"{value / scale:g} {unit}"
    return f"{value:g} B"


@_paper
def stash_bars(stalls: pd.DataFrame) -> Figure:
    """Stash stalls in % of the paired baseline's time, one bar per stall and configuration."""
    fig, axes = _panels(1, width_in=min(FULL_WIDTH_IN, 1.6 + 0.75 * len(stalls)), row_height_in=2.4)
    ax = axes[0]
    labels = [
        f"{pretty(r.framework)}\n{r.model}\n{pretty(r.loader)}\n{int(r.world_size)} GPUs\n{int(r.num_nodes)} node"
        + ("s" if int(r.num_nodes) > 1 else "")
        for r in stalls.itertuples()
    ]
    x = np.arange(len(stalls))
    bars = ax.bar(x, stalls["stall_pct"], 0.7, color=[STALL_COLORS.get(s, "#999999") for s in stalls["stall"]])
    ax.bar_label(bars, fmt="%.1f%%", fontsize=6, padding=1)
    for kind, color in STALL_COLORS.items():
        if (stalls["stall"] == kind).any():
            ax.add_patch(Rectangle((0, 0), 0, 0, color=color, label=f"{kind} stall"))
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x, labels, fontsize=6)
    ax.margins(y=0.12)
    ax.set_ylabel("stall (% of paired baseline time)")
    ax.yaxis.set_major_formatter(PercentFormatter())
    ax.grid(axis="x", visible=False)
    ax.set_title("Stash stalls")
    return _finish(fig, axes, xlabel_in=0.8, left_in=0.7)
    return fig


@_paper
def loaderbench_curves(measurements: pd.DataFrame) -> Figure:
    """Loader-alone img/s against CPU workers (or DALI threads), one curve per loader; the decode ceilings as
    reference lines: one CPU worker's rate times the workers (the most the native loader can reach) and the
    device's batched decode. Columns: case, workers, img_s (ddlbench loaderbench's records)."""
    fig, (ax,) = _panels(1)
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
    return _finish(fig, [ax], legend_cols=2)


@_paper
def accuracy_curves(evals: pd.DataFrame) -> Figure:
    """Validation top-1 (%) against the optimizer step, one curve per run (columns: run_id, step, top1)."""
    fig, (ax,) = _panels(1)
    cmap = matplotlib.colormaps["viridis"]
    runs = sorted(evals["run_id"].astype(str).unique())
    for k, run in enumerate(runs):
        rows = evals[evals["run_id"].astype(str) == run].sort_values("step")
        label = run.rsplit("/", 1)[-1]
        ax.plot(rows["step"], 100 * rows["top1"], marker=".", color=cmap(k / max(1, len(runs) - 1) * 0.85), label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation top-1 (%)")
    ax.set_ylim(0, 100)
    return _finish(fig, [ax], legend_cols=1)


# --- the learning-rate study: colour = schedule, one line per cell, panels per global batch ------------

_STUDY_SHOWN = ("framework", "loader", "model", "precision", "per_gpu_batch")  # named where they differ
_STUDY_LINES = ["-", "--", ":", "-."]
_SCHEDULE_PREFIX = "optim.schedule.name="


def _text_of(value: object) -> str:
    return "" if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else str(value)


def _study_key(frame: pd.DataFrame) -> pd.Series:
    """Each row's cell: cell_hash, or (tables without run keys) the columns that show a cell."""
    if "cell_hash" in frame:
        return frame["cell_hash"].astype(str)
    shown = [c for c in (*_STUDY_SHOWN, "world_size", "num_nodes", "schedule", "variant") if c in frame]
    return frame[shown].astype("string").fillna("").agg("/".join, axis=1)


def _study_lines(frame: pd.DataFrame, key: pd.Series) -> dict[str, tuple[str, str, str, str]]:
    """key -> (label, colour, line style, marker) of each line. Colour = schedule; the label is the
    schedule, then whatever else tells the line apart from the figure's others: framework, loader, model,
    precision and per-GPU batch where they differ, and the variant's other settings; lines of one schedule
    differ in line style and marker too."""
    firsts = frame.assign(_key=key.to_numpy()).groupby("_key", sort=False).first()
    varying = [c for c in _STUDY_SHOWN if c in firsts and firsts[c].astype("string").nunique() > 1]
    labels = {}
    for name, row in firsts.iterrows():
        schedule = _text_of(row.get("schedule")) or "no schedule"
        parts = [schedule, *(_study_part(c, row[c]) for c in varying)]
        rest = ", ".join(
            p for p in _text_of(row.get("variant")).split(", ") if p and not p.startswith(_SCHEDULE_PREFIX)
        )
        labels[name] = (schedule, ", ".join(parts) + (f" [{rest}]" if rest else ""))
    lines, seen = {}, {}
    for name, (schedule, label) in sorted(labels.items(), key=lambda item: item[1][1]):
        index = seen.setdefault(schedule, {}).setdefault(label, len(seen[schedule]))
        marker = VARIANT_MARKERS[index % len(VARIANT_MARKERS)]
        lines[name] = (label, schedule_color(schedule), _STUDY_LINES[index % len(_STUDY_LINES)], marker)
    return lines


def _study_part(column: str, value: object) -> str:
    if column == "per_gpu_batch":
        return f"b{_text_of(value)}"
    return pretty(value) if column in ("framework", "loader") else _text_of(value)


def _layout_labels(rows: pd.DataFrame, key: pd.Series, lines: dict) -> dict[str, str]:
    """The labels of one panel's lines; lines that would read alike (the same settings on another node
    layout) are told apart by their GPUs and nodes."""
    labels = {k: lines[k][0] for k in dict.fromkeys(key)}
    counts = pd.Series(labels).value_counts()
    firsts = rows.assign(_key=key.to_numpy()).groupby("_key", sort=False).first()
    for k, label in labels.items():
        if counts[label] > 1 and {"world_size", "num_nodes"} <= set(firsts.columns):
            gpus, nodes = int(firsts.loc[k, "world_size"]), int(firsts.loc[k, "num_nodes"])
            labels[k] = f"{label}, {gpus} GPUs on {nodes} node{'s' if nodes != 1 else ''}"
    return labels


def _batches(frame: pd.DataFrame) -> list:
    return sorted(frame["global_batch"].dropna().unique())


def _batch_label(value: float, _pos=None) -> str:
    """A global batch as a tick: 256, 512, 1k, ..., 64k (k = 1024)."""
    if value >= 1024 and value % 1024 == 0:
        return f"{value / 1024:g}k"
    return f"{value:g}"


@_paper
def accuracy_by_schedule(curves: pd.DataFrame) -> Figure:
    """Validation top-1 (%) against the epochs done (the optimizer step where eval.jsonl files predate
    epochs), one panel per global batch, one line per cell (metrics.accuracy_curves): colour = schedule,
    labelled with whatever else tells the cell apart; a band: min-max over the repeats."""
    batches = _batches(curves)
    by_epochs = curves["epochs"].notna().all()
    x = "epochs" if by_epochs else "step"
    key = _study_key(curves)
    lines = _study_lines(curves, key)
    fig, axes = _panels(len(batches), row_height_in=1.9, sharey=True)
    for ax, batch in zip(axes, batches):
        in_panel = (curves["global_batch"] == batch).to_numpy()
        rows_b, key_b = curves[in_panel], key[in_panel]
        labels = _layout_labels(rows_b, key_b, lines)
        for k in labels:
            rows = rows_b[(key_b == k).to_numpy()].sort_values("step")
            _, color, style, marker = lines[k]
            ax.plot(rows[x], rows["top1_pct"], style, marker=marker, color=color, label=labels[k])
            if (rows["num_repeats"] > 1).any():
                ax.fill_between(
                    rows[x], rows["top1_pct_min"], rows["top1_pct_max"], color=color, alpha=0.15, linewidth=0
                )
        ax.set_title(f"global batch {batch:,.0f}")
        ax.set_xlabel("epochs" if by_epochs else "optimizer step")
        ax.set_ylabel("validation top-1 (%)")
    return _finish(fig, axes, legend_cols=_legend_cols(axes))


@_paper
def top1_vs_global_batch(cells: pd.DataFrame) -> Figure:
    """Final validation top-1 (%) against the global batch (log2 x), one line per schedule: a line is one
    configuration at every size (group_hash: the per-GPU batch held, the global batch growing with the
    GPUs), labelled with whatever else tells it apart; other node layouts of a batch are hollow markers."""
    frame = cells.dropna(subset=["global_batch", "top1_pct"])
    curve = frame["group_hash"].astype(str) if "group_hash" in frame else _study_key(frame)
    lines = _study_lines(frame, curve)
    fig, (ax,) = _panels(1, row_height_in=2.4)
    for k, (label, color, style, marker) in lines.items():
        rows = frame[(curve == k).to_numpy()].sort_values(["global_batch", "num_nodes"])
        line = rows.drop_duplicates("global_batch")
        ax.plot(line["global_batch"], line["top1_pct"], style, marker=marker, color=color, label=label)
        extra = rows.drop(line.index)
        if not extra.empty:
            ax.plot(
                extra["global_batch"],
                extra["top1_pct"],
                linestyle="none",
                marker=marker,
                markerfacecolor="white",
                color=color,
                label="_other node layout",
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks([float(b) for b in _batches(frame)])
    ax.xaxis.set_major_formatter(FuncFormatter(_batch_label))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("global batch")
    ax.set_ylabel("final validation top-1 (%)")
    return _finish(fig, [ax], legend_cols=_legend_cols([ax]))


@_paper
def loss_and_lr(curves: pd.DataFrame) -> Figure:
    """Training loss (mean over ranks) and learning rate against the optimizer step, from the rank logs
    (metrics.training_curves): a row per global batch, a panel each, one line per cell coloured by
    schedule."""
    batches = _batches(curves)
    shown = [(c, t) for c, t in (("loss", "training loss"), ("lr", "learning rate")) if curves[c].notna().any()]
    key = _study_key(curves)
    lines = _study_lines(curves, key)
    fig, axes = _panels(len(batches) * len(shown), ncols=len(shown), row_height_in=1.7)
    panels = iter(axes)
    for batch in batches:
        in_row = (curves["global_batch"] == batch).to_numpy()
        rows_b, key_b = curves[in_row], key[in_row]
        labels = _layout_labels(rows_b, key_b, lines)
        for column, title in shown:
            ax = next(panels)
            for k in labels:
                rows = rows_b[(key_b == k).to_numpy()].dropna(subset=[column])
                _, color, style, _marker = lines[k]
                ax.plot(rows["step"], rows[column], style, color=color, linewidth=1.0, label=labels[k])
            ax.set_title(f"{title}, global batch {batch:,.0f}")
            ax.set_xlabel("optimizer step")
            ax.set_ylabel(title)
    return _finish(fig, axes, legend_cols=_legend_cols(axes))


# the utilisation figure's panels (of metrics.UTILISATION's columns; the table has them all): column ->
# (title, x axis label)
UTILISATION_PANELS = {
    "gpu_util_pct_mean": ("GPU util, mean", "%"),
    "gpu_util_pct_p95": ("GPU util, p95", "%"),
    "pcie_rx_gb_s_mean": ("PCIe rx (to GPU), mean", "GB/s"),
    "pcie_tx_gb_s_mean": ("PCIe tx (from GPU), mean", "GB/s"),
    "nvlink_rx_gb_s_mean": ("NVLink rx, mean", "GB/s"),
    "cpu_pct_mean": ("host CPU, mean", "%"),
}


def numbered(labels: list[str]) -> list[str]:
    """Labels that would read alike get #1, #2, ... (two bars are two cells, never one)."""
    counts = {label: labels.count(label) for label in labels}
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(f"{label} #{seen[label]}" if counts[label] > 1 else label)
    return out


def cell_labels(cells: pd.DataFrame) -> list[str]:
    """One label per cell: framework, loader, model, GPUs (and nodes, precision, per-GPU batch where cells
    differ in them), its variant; cells that would still read alike are numbered, so none is hidden."""
    varying = [c for c in ("num_nodes", "precision", "per_gpu_batch") if c in cells and cells[c].nunique() > 1]
    labels = []
    for row in cells.itertuples(index=False):
        label = f"{pretty(row.framework)}, {pretty(row.loader)}, {row.model}, {row.world_size} GPU"
        for column in varying:
            value = getattr(row, column)
            label += f"/{value}n" if column == "num_nodes" else f", {_SHORT.get(column, '')}{value}"
        variant = getattr(row, "variant", "")
        labels.append(label + (f" [{variant}]" if isinstance(variant, str) and variant else ""))
    return numbered(labels)


@_paper
def utilisation_bars(cells: pd.DataFrame) -> Figure:
    """One panel per utilisation figure (UTILISATION_PANELS that some cell has), one horizontal bar per
    cell in every panel, labelled on the left of each row of panels (colour = framework, hatched = DALI)."""
    rows = cells.reset_index(drop=True)
    metrics_shown = [c for c in UTILISATION_PANELS if c in rows and rows[c].notna().any()]
    labels = cell_labels(rows)
    ncols = min(3, max(1, len(metrics_shown)))
    fig, axes = _panels(
        max(1, len(metrics_shown)), ncols=ncols, row_height_in=max(1.4, 0.16 * len(rows) + 0.6), sharey=True
    )
    y = np.arange(len(rows))
    colors = [framework_color(f) for f in rows["framework"]]
    hatches = ["////" if loader == "dali" else None for loader in rows["loader"]]
    for ax, column in zip(axes, metrics_shown):
        bars = ax.barh(y, rows[column].to_numpy(float), 0.7, color=colors, edgecolor="white", linewidth=0.3)
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
        title, unit = UTILISATION_PANELS[column]
        ax.set_title(title)
        ax.set_xlabel(unit)
        if unit == "%":
            ax.set_xlim(0, 100)
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="y", labelsize=6)
    if metrics_shown:
        axes[0].set_yticks(y, labels)
        axes[0].invert_yaxis()  # the table's order, top to bottom
    for framework in dict.fromkeys(rows["framework"]):
        axes[0].add_patch(Rectangle((0, 0), 0, 0, color=framework_color(framework), label=pretty(framework)))
    if (rows["loader"] == "dali").any():
        axes[0].add_patch(Rectangle((0, 0), 0, 0, facecolor="white", edgecolor="#555555", hatch="////", label="DALI"))
    left_in = min(3.2, 0.3 + 0.042 * max((len(label) for label in labels), default=0))
    return _finish(fig, axes, title="Utilisation per configuration", left_in=left_in)


@_paper
def p2p_heatmap(matrix: pd.DataFrame) -> Figure:
    """GPU-to-GPU copy bandwidth (GB/s), one heatmap per commbench file and host: rows the source GPU,
    columns the destination, each cell annotated with its GB/s (one colour scale over all panels); the
    diagonal (no copy) blank."""
    groups = list(matrix.groupby(["source", "host"], sort=True))
    fig, axes = _panels(max(1, len(groups)), ncols=2, row_height_in=2.6, width_in=FULL_WIDTH_IN)
    top = float(matrix["p2p_gb_s"].max()) if matrix["p2p_gb_s"].notna().any() else 1.0
    for ax, ((source, host), rows) in zip(axes, groups):
        gpus = sorted({*rows["src_gpu"], *rows["dst_gpu"]})
        grid = rows.pivot_table(index="src_gpu", columns="dst_gpu", values="p2p_gb_s", aggfunc="median")
        grid = grid.reindex(index=gpus, columns=gpus)
        ax.imshow(grid.to_numpy(float), cmap="viridis", vmin=0, vmax=top)
        for i, src in enumerate(gpus):
            for j, dst in enumerate(gpus):
                value = grid.loc[src, dst]
                if value == value:
                    ax.text(
                        j,
                        i,
                        f"{value:.0f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if value < 0.6 * top else "black",
                    )
        ax.set_xticks(range(len(gpus)), [str(g) for g in gpus])
        ax.set_yticks(range(len(gpus)), [str(g) for g in gpus])
        ax.set_xlabel("destination GPU")
        ax.set_ylabel("source GPU")
        ax.grid(visible=False)
        ax.set_title(f"{host} ({source})" if host else str(source), fontsize=7)
    return _finish(fig, axes, title="P2P copy bandwidth (GB/s)")


@_paper
def h2d_bars(h2d: pd.DataFrame) -> Figure:
    """Host-to-device bandwidth per GPU with every rank copying at once: one bar per rank, one panel per
    commbench file."""
    groups = list(h2d.groupby("source", sort=True))
    widest = max((len(rows) for _, rows in groups), default=1)
    fig, axes = _panels(
        max(1, len(groups)), ncols=1, row_height_in=2.0, width_in=min(FULL_WIDTH_IN, 1.6 + 0.35 * widest)
    )
    for ax, (source, rows) in zip(axes, groups):
        x = np.arange(len(rows))
        labels = [f"r{r.rank}\nGPU {'' if pd.isna(r.gpu) else int(r.gpu)}" for r in rows.itertuples(index=False)]
        bars = ax.bar(x, rows["h2d_gb_s"].to_numpy(float), 0.7, color="#0072B2")
        ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
        ax.set_xticks(x, labels, fontsize=6)
        ax.set_ylabel("GB/s")
        ax.margins(y=0.12)
        ax.grid(axis="x", visible=False)
        concurrent = rows["concurrent_gpus"].dropna()
        ax.set_title(
            f"{source}: {int(concurrent.max()) if len(concurrent) else len(rows)} GPUs copying at once", fontsize=7
        )
    return _finish(fig, axes, title="Host-to-device bandwidth per GPU", xlabel_in=0.6)


# the modes figure's panels (metrics.MODES' columns): column -> (title, x axis label); peak memory draws the
# reserved bytes as an outline around the allocated bar
MODE_PANELS = {
    "relative_time": ("training time (baseline = 1)", "x baseline"),
    "gpu_util_pct_mean": ("GPU util", "%, mean"),
    "peak_allocated_gib": ("peak GPU memory", "GiB"),
    "pcie_rx_gb_s_mean": ("PCIe rx (to GPU)", "GB/s, mean"),
    "pcie_tx_gb_s_mean": ("PCIe tx (from GPU)", "GB/s, mean"),
}
AMP_HATCH = "////"


def mode_labels(rows: pd.DataFrame) -> list[str]:
    """One label per cell of a mode group: its mode (framework, ZeRO stage), precision and variant; cells
    that would still read alike are numbered, so none is hidden."""
    labels = []
    for row in rows.itertuples(index=False):
        mode = str(row.mode)
        framework = str(row.framework)
        label = pretty(framework) + mode[len(framework) :] if mode.startswith(framework) else mode
        label += f", {row.precision}"
        variant = getattr(row, "variant", "")
        labels.append(label + (f" [{variant}]" if isinstance(variant, str) and variant else ""))
    return numbered(labels)


@_paper
def mode_bars(rows: pd.DataFrame, *, title: str) -> Figure:
    """One mode group (metrics.mode_cells: cells alike but in mode and precision): a panel per figure that
    some cell has (MODE_PANELS), one horizontal bar per cell in each, labelled on the left with its full
    configuration (colour = framework, hatched = AMP). Training time has the baseline's 1 dashed; peak
    memory is allocated (filled) inside reserved (outline)."""
    rows = rows.reset_index(drop=True)
    shown = [c for c in MODE_PANELS if c in rows and rows[c].notna().any()]
    labels = mode_labels(rows)
    fig, axes = _panels(
        max(1, len(shown)),
        ncols=min(3, max(1, len(shown))),
        row_height_in=max(1.4, 0.16 * len(rows) + 0.6),
        sharey=True,
    )
    y = np.arange(len(rows))
    colors = [framework_color(f) for f in rows["framework"]]
    hatches = [None if str(p) == "fp32" else AMP_HATCH for p in rows["precision"]]
    for ax, column in zip(axes, shown):
        if column == "peak_allocated_gib" and "peak_reserved_gib" in rows and rows["peak_reserved_gib"].notna().any():
            ax.barh(
                y, rows["peak_reserved_gib"].to_numpy(float), 0.7, facecolor="none", edgecolor="#555555", linewidth=0.6
            )
        bars = ax.barh(y, rows[column].to_numpy(float), 0.7, color=colors, edgecolor="white", linewidth=0.3)
        for bar, hatch in zip(bars, hatches):
            bar.set_hatch(hatch)
        if column == "relative_time":
            ax.axvline(1.0, color=IDEAL_COLOR, linestyle="--", linewidth=0.8)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
            ax.margins(x=0.15)
        title_text, unit = MODE_PANELS[column]
        ax.set_title(title_text)
        ax.set_xlabel(unit)
        if unit.startswith("%"):
            ax.set_xlim(0, 100)
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="y", labelsize=6)
    if shown:
        axes[0].set_yticks(y, labels)
        axes[0].invert_yaxis()  # the table's order, top to bottom
    for framework in dict.fromkeys(rows["framework"]):
        axes[0].add_patch(Rectangle((0, 0), 0, 0, color=framework_color(framework), label=pretty(framework)))
    if any(hatches):
        axes[0].add_patch(Rectangle((0, 0), 0, 0, facecolor="white", edgecolor="#555555", hatch=AMP_HATCH, label="AMP"))
    if "peak_allocated_gib" in shown and rows["peak_reserved_gib"].notna().any():
        axes[0].add_patch(
            Rectangle((0, 0), 0, 0, facecolor="none", edgecolor="#555555", linewidth=0.6, label="reserved (outline)")
        )
    left_in = min(3.2, 0.3 + 0.042 * max((len(label) for label in labels), default=0))
    return _finish(fig, axes, title=title, left_in=left_in)


# the host figure's parts, left to right in each bar: (legend name, column of metrics.host_times)
HOST_PARTS = [("data", "data_ms_mean"), ("compute", "compute_ms_mean")]
SLOW_HOST_COLOR = "#D55E00"


@_paper
def host_bars(hosts: pd.DataFrame, *, run_ids: list[str]) -> Figure:
    """Per run (one panel each), a bar per host of its ranks' mean step: data, compute and the rest of the
    step (waiting in collectives, other), in ms; the median host's compute dotted, slow hosts' names in the
    straggler colour."""
    fig, axes = _panels(max(1, len(run_ids)), ncols=1, row_height_in=1.8, width_in=FULL_WIDTH_IN)
    for ax, run_id in zip(axes, run_ids):
        rows = hosts[hosts["run_id"] == run_id].reset_index(drop=True)
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for label, column in HOST_PARTS:
            values = rows[column].fillna(0).to_numpy(float)
            ax.bar(x, values, 0.7, bottom=bottom, color=BREAKDOWN_COLORS[label], label=label, linewidth=0)
            bottom += values
        rest = np.maximum(rows["step_ms_mean"].to_numpy(float) - bottom, 0)
        ax.bar(x, rest, 0.7, bottom=bottom, color=BREAKDOWN_COLORS["other"], label="rest of the step (waiting, other)")
        ax.axhline(
            float(rows["compute_ms_mean"].median()) + float(rows["data_ms_mean"].fillna(0).median()),
            color=IDEAL_COLOR,
            linestyle=":",
            linewidth=0.8,
            label="median host (data + compute)",
        )
        ax.set_xticks(x, [f"{h}\n{r}" for h, r in zip(rows["host"], rows["ranks"])], fontsize=6)
        for tick, slow in zip(ax.get_xticklabels(), rows["straggler"].astype(bool)):
            if slow:
                tick.set_color(SLOW_HOST_COLOR)
                tick.set_fontweight("bold")
        ax.set_ylabel("ms per step")
        ax.grid(axis="x", visible=False)
        ax.set_title(str(run_id), fontsize=7)
    return _finish(fig, axes, title="Per-host step time (slow hosts named in bold)", xlabel_in=0.6)


# --- ddlbench predict (analysis/predict.py) ---------------------------------------------------------

_PREDICTED_PARTS = (
    ("data", "data_pct"),
    ("compute", "compute_pct"),
    ("allreduce (exposed)", "allreduce_pct"),
    ("other", "other_pct"),
)


@_paper
def predicted_breakdown(table: pd.DataFrame) -> Figure:
    """Predicted shares of the step per GPU count (stacked bars) beside the weak-scaling efficiency."""
    fig, (ax, eff) = _panels(2, ncols=2, row_height_in=2.3)
    rows = table.sort_values("gpus")
    x = np.arange(len(rows))
    ticks = [f"{int(g)}" for g in rows["gpus"]]
    bottom = np.zeros(len(rows))
    for label, column in _PREDICTED_PARTS:
        values = rows[column].to_numpy(float)
        ax.bar(x, values, bottom=bottom, color=BREAKDOWN_COLORS[label], width=0.7, label=label)
        bottom += values
    ax.set_ylabel("share of the step")
    ax.set_ylim(0, 100)
    eff.plot(x, 100 * rows["efficiency"].to_numpy(float), color="black", marker="o", ms=3)
    eff.set_ylim(0, 105)
    eff.set_ylabel("weak-scaling efficiency (vs 1 GPU)")
    for a in (ax, eff):
        a.set_xticks(x, ticks, rotation=90 if len(x) > 12 else 0)
        a.set_xlabel("GPUs")
        a.yaxis.set_major_formatter(PercentFormatter(100))
    return _finish(fig, [ax, eff], title="Predicted step breakdown and efficiency")


@_paper
def predicted_vs_reference(compared: pd.DataFrame) -> Figure:
    """Predicted and reference shares per GPU count: a panel per share, the calibration point marked."""
    parts = (("allreduce", "allreduce (exposed)"), ("data", "data"), ("compute", "compute"))
    fig, axes = _panels(len(parts), row_height_in=2.0, sharey=True)
    rows = compared.sort_values("gpus")
    for ax, (share, color_key) in zip(axes, parts):
        color = BREAKDOWN_COLORS[color_key]
        ax.plot(rows["gpus"], rows[f"{share}_pct_ref"], color=color, marker="s", ms=4, ls="--", label="reference")
        ax.plot(rows["gpus"], rows[f"{share}_pct_pred"], color="black", marker="o", ms=3, label="predicted")
        calib = rows[~rows["held_out"]]
        ax.scatter(
            calib["gpus"],
            calib[f"{share}_pct_pred"],
            s=60,
            facecolors="none",
            edgecolors="black",
            label="calibration point",
            zorder=3,
        )
        ax.set_xscale("log", base=2)
        ax.set_xticks(rows["gpus"], [f"{int(g)}" for g in rows["gpus"]], rotation=90)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(share)
        ax.set_xlabel("GPUs")
        ax.yaxis.set_major_formatter(PercentFormatter(100))
    axes[0].set_ylabel("share of the step")
    return _finish(fig, axes, title="Predicted vs reference breakdown", legend_cols=3, xlabel_in=0.75)


@_paper
def predicted_vs_measured(validation: pd.DataFrame) -> Figure:
    """Held-out runs: predicted against measured throughput (the diagonal is exact, the band +-10%)."""
    fig, (ax,) = _panels(1, row_height_in=2.6)
    top = float(max(validation["measured"].max(), validation["predicted"].max())) * 1.15
    line = np.array([0, top])
    ax.fill_between(line, 0.9 * line, 1.1 * line, color="#DDDDDD", label="within 10%")
    ax.plot(line, line, color="black", lw=0.8, label="exact")
    labels = list(dict.fromkeys(validation["label"]))
    markers = "osD^v<>"
    for i, label in enumerate(labels):
        rows = validation[validation["label"] == label]
        ax.scatter(rows["measured"], rows["predicted"], marker=markers[i % len(markers)], s=22, label=label or "runs")
        for _, r in rows.iterrows():
            ax.annotate(
                f"{int(r['gpus'])}",
                (r["measured"], r["predicted"]),
                fontsize=6,
                xytext=(3, 2),
                textcoords="offset points",
            )
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("measured samples/s")
    ax.set_ylabel("predicted samples/s")
    return _finish(fig, [ax], title="Prediction of held-out runs (labels: GPUs)", legend_cols=3)
