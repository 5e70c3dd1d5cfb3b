"""What every figure shares: DataFrames in, matplotlib Figures out, drawing only (no metrics, no files:
report.py saves). Figures are built on matplotlib.figure.Figure (the Agg canvas, no pyplot state), sized
for a paper (7 in wide), with one palette (analysis/palette.py): colour = framework, line style = loader.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")  # never a window, even if pyplot gets imported elsewhere

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from analysis.palette import FULL_WIDTH_IN, HALF_WIDTH_IN, PAPER_RC, loader_style

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


def paper_style(draw):
    """Draw inside the paper rcParams (artists read them when created; save inside them too)."""
    import functools

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(PAPER_RC):
            return draw(*args, **kwargs)

    return wrapper


def pretty(name: object) -> str:
    return _NAMES.get(str(name), str(name))


def panels(
    num: int, *, ncols: int = 3, row_height_in: float = 2.0, width_in: float = FULL_WIDTH_IN, sharey: bool = False
) -> tuple[Figure, list]:
    """A grid of `num` panels; finish() sizes the margins (a fixed layout: constrained layout
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


def finish(
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


def model_key(name: str) -> tuple:
    """resnet50 < resnet101 < resnet152: natural order, not text order."""
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name)))


def model_names(frame: pd.DataFrame) -> list[str]:
    return sorted(frame["model"].dropna().unique(), key=model_key)


def gpu_axis(ax, values, *, log_y: bool = False) -> None:
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


def curves(frame: pd.DataFrame, *, curve: str = "group_hash"):
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
        label += "".join(f", {SHORT_NAMES.get(c, c)}{first[c]}" for c in varying)
        if "variant" in rows and first["variant"]:
            label += f" [{first['variant']}]"
        rows = rows.sort_values(["world_size", "num_nodes"])
        line = rows.drop_duplicates("world_size")
        seen = drawn.setdefault((first["framework"], first["loader"]), 0)
        drawn[(first["framework"], first["loader"])] += 1
        marker = loader_style(first["loader"])[1] if seen == 0 else VARIANT_MARKERS[seen % len(VARIANT_MARKERS)]
        yield first["framework"], first["loader"], label, marker, line, rows.drop(line.index)


def legend_columns(axes: list) -> int:
    """As many legend columns as the longest label leaves room for on a page's width."""
    longest = max((len(label) for ax in axes for label in ax.get_legend_handles_labels()[1]), default=0)
    return 4 if longest <= 24 else 2 if longest <= 48 else 1


SHORT_NAMES = {"precision": "", "per_gpu_batch": "b", "global_batch": "B", "variant": "", "pair": ""}


def pair_variant(cells: pd.DataFrame) -> pd.Series:
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


def extra_points(ax, extra: pd.DataFrame, y_column: str, *, color: str, marker: str, scale: float = 1.0) -> None:
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


def gpu_labels(rows: pd.DataFrame) -> list[str]:
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
            label += f"/{value}n" if column == "num_nodes" else f", {SHORT_NAMES.get(column, '')}{value}"
        variant = getattr(row, "variant", "")
        labels.append(label + (f" [{variant}]" if isinstance(variant, str) and variant else ""))
    return numbered(labels)
