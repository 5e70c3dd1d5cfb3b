"""`ddlbench predict`'s figures: the predicted breakdown, the prediction beside a study's table, and
against held-out measured runs (the model: analysis/predict/model.py).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator, PercentFormatter

from analysis.device import GPU, WORDS, RankWords
from analysis.figures import finish, panels, paper_style
from analysis.palette import BREAKDOWN_COLORS, loader_color, loader_style

_PREDICTED_PARTS = (
    ("data", "data_pct"),
    ("compute", "compute_pct"),
    ("allreduce (exposed)", "allreduce_pct"),
    ("other", "other_pct"),
)


def _about(fig: Figure, text: str) -> Figure:
    """`text` under the figure's title (what was predicted, from what): the figure grows by its lines, the
    panels keep their size."""
    if not text:
        return fig
    lines = textwrap.wrap(text, width=int(fig.get_figwidth() * 17))
    extra_in = 0.05 + 0.14 * len(lines)
    height, params = fig.get_figheight(), fig.subplotpars
    top_in, bottom_in = (1 - params.top) * height, params.bottom * height
    grown = height + extra_in
    fig.set_figheight(grown)
    fig.subplots_adjust(top=1 - (top_in + extra_in) / grown, bottom=bottom_in / grown)
    if fig._suptitle is not None:
        fig._suptitle.set_y(1 - 0.08 / grown)
    fig.text(0.5, 1 - 0.36 / grown, "\n".join(lines), ha="center", va="top", fontsize=6.5, color="#333333")
    return fig


@paper_style
def predicted_breakdown(table: pd.DataFrame, *, about: str = "", words: RankWords = WORDS[GPU]) -> Figure:
    """Predicted shares of the step per GPU count (stacked bars) beside the weak-scaling efficiency; `about`
    (the system, model, batch, image size and calibration run) under the title."""
    fig, (ax, eff) = panels(2, ncols=2, row_height_in=2.3)
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
    eff.set_ylabel(f"weak-scaling efficiency (vs {words.count(1)})")
    for a in (ax, eff):
        a.set_xticks(x, ticks, rotation=90 if len(x) > 12 else 0)
        a.set_xlabel(words.axis)
        a.yaxis.set_major_formatter(PercentFormatter(100))
    return _about(finish(fig, [ax, eff], title="Predicted step breakdown and efficiency"), about)


@paper_style
def predicted_vs_reference(compared: pd.DataFrame, *, about: str = "", words: RankWords = WORDS[GPU]) -> Figure:
    """Predicted and reference shares per GPU count: a panel per share, the calibration point marked; `about`
    under the title."""
    parts = (("allreduce", "allreduce (exposed)"), ("data", "data"), ("compute", "compute"))
    fig, axes = panels(len(parts), row_height_in=2.0, sharey=True)
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
        ax.set_xlabel(words.axis)
        ax.yaxis.set_major_formatter(PercentFormatter(100))
    axes[0].set_ylabel("share of the step")
    return _about(finish(fig, axes, title="Predicted vs reference breakdown", legend_cols=3, xlabel_in=0.75), about)


@paper_style
def predicted_vs_measured(validation: pd.DataFrame, *, about: str = "", words: RankWords = WORDS[GPU]) -> Figure:
    """Held-out runs: predicted against measured throughput (the diagonal is exact, the band +-10%); `about`
    under the title."""
    fig, (ax,) = panels(1, row_height_in=2.6)
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
    title = f"Prediction of held-out runs (labels: {words.axis})"
    return _about(finish(fig, [ax], title=title, legend_cols=3), about)


@paper_style
def loaders_vs_reference(compared: Mapping[str, pd.DataFrame], loader_of: Mapping[str, str]) -> Figure:
    """Each prediction's allreduce share against the study's, by GPU count (left: the study's rows of a loader
    dotted, once; each prediction solid or dashed in its loader's colour), and the error per row in percentage
    points (right). compared: a label per prediction (its loader and settings) -> compare_reference's table of
    it; loader_of: label -> the loader's name."""
    fig, (share, error) = panels(2, row_height_in=2.6)
    labels = list(compared)
    counts = sorted({int(g) for rows in compared.values() for g in rows["gpus"]})
    at = {g: i for i, g in enumerate(counts)}
    width = 0.8 / max(1, len(labels))
    drawn: list[str] = []  # loaders whose study rows are drawn
    for k, label in enumerate(labels):
        rows = compared[label].sort_values("gpus")
        loader = loader_of[label]
        color, (_, marker) = loader_color(loader), loader_style(loader)
        x = [at[int(g)] for g in rows["gpus"]]
        if loader not in drawn:
            share.plot(x, rows["allreduce_pct_ref"], color=color, ls=":", marker="s", ms=4, label=f"study, {loader}")
        again = sum(loader_of[other] == loader for other in labels[:k])  # this loader's earlier predictions
        style = ("-", "--", "-.")[again % 3]
        share.plot(
            x, rows["allreduce_pct_pred"], color=color, ls=style, marker=marker, ms=4, label=f"predicted, {label}"
        )
        error.bar(
            [i - 0.4 + width * (k + 0.5) for i in x],
            rows["allreduce_err_pp"],
            width,
            color=color,
            alpha=1.0 - 0.35 * again,
            label=f"error, {label}",
        )
        drawn.append(loader)
    for ax in (share, error):
        ax.set_xticks(range(len(counts)), [str(g) for g in counts], rotation=90)
        ax.set_xlabel("GPUs")
    share.yaxis.set_major_formatter(PercentFormatter(100))
    share.set_ylabel("allreduce share of the step")
    share.set_title("allreduce share")
    error.axhline(0.0, color="black", lw=0.8)
    error.set_ylabel("predicted - study (pp)")
    error.set_title("error per row")
    return finish(fig, [share, error], title="Predicted by loader vs study A", legend_cols=3, xlabel_in=0.75)
