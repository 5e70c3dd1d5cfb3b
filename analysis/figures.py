"""What every figure shares: DataFrames in, matplotlib Figures out, drawing only (no metrics, no files:
report.py saves). Figures are built on matplotlib.figure.Figure (the Agg canvas, no pyplot state), sized
for a paper (7 in wide), with one palette (analysis/palette.py): colour = framework, line style = loader; where
several curves of a panel share a framework, each further one takes a colour of its own (curve_colors).
A label says what tells its curve or bar apart from the others: what they all share (a framework, a loader,
a system profile) is left out of every label and said once, in the panel's title or the caption.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # never a window, even if pyplot gets imported elsewhere

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from analysis.device import rank_words
from analysis.palette import CURVE_COLORS, FULL_WIDTH_IN, HALF_WIDTH_IN, PAPER_RC, framework_color, loader_style

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
    """A framework's, loader's or model's name as a reader knows it (ddp -> PyTorch-DDP, resnet18 -> ResNet-18)."""
    return _NAMES.get(str(name)) or pretty_model(str(name))


_MODEL = re.compile(r"(resnet|vgg)(\d+)((?:_bn|_nobn|_noskip)*)$")
_MODEL_NAMES = {"resnet": "ResNet", "vgg": "VGG", "_bn": " BN", "_nobn": " no BN", "_noskip": " no skip"}
_FAMILIES = {
    "bert_base": "BERT-base",
    "bert_large": "BERT-large",
    "mobilenet_v2": "MobileNetV2",
    "retinanet": "RetinaNet",
    "simple_cnn": "simple CNN",
}


def pretty_model(name: str) -> str:
    """A model's run-directory name (benchmarks/rundir/cell_identity.py model_name) as its paper writes it:
    resnet50_nobn -> ResNet-50 no BN, shufflenet_v2_x1_0 -> ShuffleNetV2 x1.0; any other name as it is."""
    if (match := _MODEL.match(name)) is not None:
        family, depth, variants = match.groups()
        extra = "".join(_MODEL_NAMES[v] for v in re.findall(r"_[a-z]+", variants))
        return f"{_MODEL_NAMES[family]}-{depth}{extra}"
    if name.startswith("shufflenet_v2_x"):
        return f"ShuffleNetV2 x{name.removeprefix('shufflenet_v2_x').replace('_', '.')}"
    return _FAMILIES.get(name, name)


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


def gpu_axis(ax, values, *, log_y: bool = False, label: str = "GPUs") -> None:
    """GPU counts are powers of two: a log2 x axis labelled with the counts themselves; `label` names the
    ranks (rank_words(cells).axis: "GPUs", "ranks (CPU)")."""
    ax.set_xscale("log", base=2)
    ticks = sorted({int(v) for v in values})
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(label)
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
IDEAL_DASHES = (0, (4, 2))  # a curve's ideal line: dashed, thin, in the curve's colour
IDEAL_LABEL = "ideal (dashed, in its curve's colour)"


@dataclass(slots=True)
class Curve:
    """One scaling curve of a panel: its configuration, legend label, marker and colour, the rows its line
    runs through (the fewest nodes at each GPU count) and its other node layouts (`extra`)."""

    framework: str
    loader: str
    label: str
    marker: str
    color: str
    line: pd.DataFrame
    extra: pd.DataFrame


def shared_parts(labels: list[list[str]]) -> list[str]:
    """The parts every label holds (in the first's order): what no label needs to repeat. None for a
    single label, which names its one curve or bar whole."""
    if len(labels) < 2:
        return []
    common = set(labels[0]).intersection(*map(set, labels[1:]))
    return [part for part in labels[0] if part in common]


def distinct_labels(labels: list[list[str]]) -> list[str]:
    """Each label's parts without those all labels share, joined by ', '; labels that share every part
    (alike cells, numbered by the caller) keep them all, so that no label is blank."""
    shared = set(shared_parts(labels))
    return [", ".join([p for p in parts if p not in shared] or parts) for parts in labels]


def curve_colors(keys: list[tuple]) -> dict[tuple, str]:
    """One colour per curve: keys are (framework, ...) tuples; the first curve of each framework takes the
    framework's colour, each further one the next colour no curve has yet (CURVE_COLORS), so that no two
    curves of a figure share one (while colours last)."""
    colors: dict[tuple, str] = {}
    used = {framework_color(k[0]) for k in dict.fromkeys(keys)}
    spare = [c for c in CURVE_COLORS if c not in used]
    seen: set[str] = set()
    for k, key in enumerate(dict.fromkeys(keys)):
        if key[0] not in seen:
            colors[key] = framework_color(key[0])
            seen.add(key[0])
        else:
            colors[key] = spare.pop(0) if spare else CURVE_COLORS[k % len(CURVE_COLORS)]
    return colors


def _curve_key(first: pd.Series, varying: list[str]) -> tuple:
    return (
        str(first["framework"]),
        str(first["loader"]),
        *(str(first[c]) for c in varying),
        str(first.get("variant", "")),
    )


def curves(frame: pd.DataFrame, *, curve: str = "group_hash") -> tuple[list[Curve], list[str]]:
    """(the curves of one panel, what they all share): one curve per scaling group (one configuration at
    every size), labelled with what tells it apart from the panel's other curves (framework, loader,
    precision and batch where they differ, its variant's settings) without what every curve of the panel
    shares (returned, for the panel's title), each in a colour of its own (curve_colors). The line runs
    through the fewest nodes at each GPU count; other node layouts are `extra` points."""
    if curve not in frame:
        frame = frame.assign(**{curve: frame[["framework", "loader"]].astype("string").agg("/".join, axis=1)})
    batch = "global_batch" if curve == "strong_group_hash" else "per_gpu_batch"  # the one a curve holds
    firsts = frame.groupby(curve, sort=False).first()
    varying = [c for c in ("precision", batch, "campaign") if c in firsts and firsts[c].nunique() > 1]
    groups = sorted(frame.groupby(curve, sort=False), key=lambda g: _curve_order(g[1], varying))
    parts = []
    for _, rows in groups:
        first = rows.iloc[0]
        label = [pretty(first["framework"]), pretty(first["loader"])]
        label += [f"{SHORT_NAMES.get(c, c)}{first[c]}" for c in varying]
        if "variant" in rows and isinstance(first["variant"], str) and first["variant"]:
            own = first["variant"].split(", ")
            label += [p for p in own if not (p.startswith(CAMPAIGN_SETTING) and "campaign" in varying)]
        parts.append(label)
    labels = numbered(distinct_labels(parts))
    colors = curve_colors([_curve_key(rows.iloc[0], varying) for _, rows in groups])
    drawn: dict[tuple, int] = {}
    out = []
    for (_, rows), label in zip(groups, labels):
        first = rows.iloc[0]
        rows = rows.sort_values(["world_size", "num_nodes"])
        line = rows.drop_duplicates("world_size")
        seen = drawn.setdefault((first["framework"], first["loader"]), 0)
        drawn[(first["framework"], first["loader"])] += 1
        marker = loader_style(first["loader"])[1] if seen == 0 else VARIANT_MARKERS[seen % len(VARIANT_MARKERS)]
        color = colors[_curve_key(first, varying)]
        out.append(Curve(first["framework"], first["loader"], label, marker, color, line, rows.drop(line.index)))
    return out, shared_parts(parts)


def panel_title(name: str, shared: list[str]) -> str:
    """A panel's title: its name, and what all its curves share (left out of their labels), on a line of its own
    where both together would not fit a panel's width."""
    if not shared:
        return name
    together = f"{name}: {', '.join(shared)}"
    return together if len(together) <= 40 else f"{name}\n{', '.join(shared)}"


def legend_columns(axes: list) -> int:
    """As many legend columns as the longest label leaves room for on a page's width."""
    longest = max((len(label) for ax in axes for label in ax.get_legend_handles_labels()[1]), default=0)
    return 4 if longest <= 24 else 2 if longest <= 48 else 1


SHORT_NAMES = {"precision": "", "per_gpu_batch": "b", "global_batch": "B", "variant": "", "pair": "", "campaign": ""}


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


# the settings that may tell the cells of one figure apart, in the order a label names them
DISTINGUISHING = ("framework", "loader", "model", "precision", "per_gpu_batch", "global_batch", "num_nodes", "campaign")
CAMPAIGN_SETTING = "run.campaign="  # a variant's part that the campaign column says already


def setting_words(rows: pd.DataFrame, *, skip: tuple[str, ...] = ()) -> list[list[str]]:
    """Per row (a cell drawn in one figure), the settings that differ among the rows, as short words a label
    shows: 'DALI', 'b32', '2 nodes', the campaign's name, and the variant's own settings ('framework.zero_stage=2');
    what every row shares is left out (a title says it). `skip`: columns the figure shows otherwise (its axis)."""
    if rows.empty:
        return []
    columns = [c for c in DISTINGUISHING if c in rows and c not in skip and rows[c].astype("string").nunique() > 1]
    parts: list[list[str]] = []
    for _, row in rows.iterrows():
        words = []
        for column in columns:
            value = row[column]
            if column in ("framework", "loader"):
                words.append(pretty(value))
            elif column == "num_nodes":
                words.append(f"{value} node{'s' if value != 1 else ''}")
            else:
                words.append(f"{SHORT_NAMES.get(column, '')}{value}")
        variant = row.get("variant", "")
        if isinstance(variant, str) and variant:
            words += [p for p in variant.split(", ") if not (p.startswith(CAMPAIGN_SETTING) and "campaign" in columns)]
        parts.append(words)
    return parts


UNDER_BAR_CHARS = 10  # words this short stand under their bar; longer ones become a letter spelled out in the key


def gpu_labels(rows: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(a label per bar, the key under the figure): its rank count; where several cells share one, under
    the count what tells them apart among the panel's bars (setting_words: 'b16', the campaign) when that is
    short, else a letter (2a, 2b) spelled out in the key ("a: framework.bucket_cap_mb=25"), so that no two
    bars read alike. A long variant never stands under its bar: several would overprint."""
    shared = rows["world_size"].duplicated(keep=False).to_numpy()
    words = setting_words(rows[shared], skip=("world_size", "global_batch")) if shared.any() else []
    texts = [", ".join(parts) for parts in distinct_words(words)]
    short = all(len(t) <= UNDER_BAR_CHARS for t in texts)
    what = iter(texts)
    letters: dict[str, str] = {}
    labels = []
    for is_shared, row in zip(shared, rows.itertuples(index=False)):
        label = f"{row.world_size}"
        if is_shared:
            text = next(what)
            label += f"\n{text}" if short else letters.setdefault(text, _letter(len(letters)))
        labels.append(label)
    return numbered(labels), [f"{letter}: {text}" for text, letter in letters.items()]


def distinct_words(parts: list[list[str]]) -> list[list[str]]:
    """Each label's parts without those all labels share; a label left with none keeps its own (never blank)."""
    shared = set(shared_parts(parts))
    return [[p for p in words if p not in shared] or words for words in parts]


def _letter(k: int) -> str:
    """a, b, ..., z, aa, ab, ...: a bar's letter."""
    return _letter(k // 26 - 1) + chr(ord("a") + k % 26) if k >= 26 else chr(ord("a") + k)


def numbered(labels: list[str]) -> list[str]:
    """Labels that would read alike get #1, #2, ... (two bars are two cells, never one)."""
    counts = {label: labels.count(label) for label in labels}
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(f"{label} #{seen[label]}" if counts[label] > 1 else label)
    return out


def cell_label_parts(cells: pd.DataFrame) -> list[list[str]]:
    """Per cell, the parts of its label: framework, loader, model, its ranks (GPUs or CPU ranks, by its
    `device`; and nodes, precision, per-GPU batch where cells differ in them), its variant's settings.
    `shared_parts` of them is what a figure's title names once."""
    varying = [
        c for c in ("num_nodes", "precision", "per_gpu_batch", "campaign") if c in cells and cells[c].nunique() > 1
    ]
    parts = []
    for row in cells.itertuples(index=False):
        words = rank_words(getattr(row, "device", None))
        label = [pretty(row.framework), pretty(row.loader), str(row.model), words.count(row.world_size)]
        for column in varying:
            value = getattr(row, column)
            label.append(f"{value} nodes" if column == "num_nodes" else f"{SHORT_NAMES.get(column, '')}{value}")
        variant = getattr(row, "variant", "")
        variant = variant.split(", ") if isinstance(variant, str) and variant else []
        parts.append(label + [p for p in variant if not (p.startswith(CAMPAIGN_SETTING) and "campaign" in varying)])
    return parts


def cell_labels(cells: pd.DataFrame) -> list[str]:
    """One label per cell (cell_label_parts), less what every cell shares (the title says it:
    `shared_parts`); cells that would still read alike are numbered, so none is hidden."""
    return numbered(distinct_labels(cell_label_parts(cells)))
