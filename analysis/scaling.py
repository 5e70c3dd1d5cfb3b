"""Throughput and scaling efficiency: each cell's efficiency against its curve's baseline (weak or strong
scaling), the throughput and efficiency figures, and the report's throughput section.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from analysis.cells import CELL, DEFAULT_SAMPLE_UNIT, MEMORY, SCALING_GROUP, rate_label, rate_suffix, with_sample_unit
from analysis.device import CPU, MIXED, device_of, rank_words, with_device
from analysis.figures import (
    IDEAL_DASHES,
    IDEAL_LABEL,
    SHORT_NAMES,
    curve_colors,
    curves,
    extra_points,
    finish,
    gpu_axis,
    legend_columns,
    model_names,
    pair_variant,
    panel_title,
    panels,
    paper_style,
    pretty,
)
from analysis.palette import IDEAL_COLOR, framework_color, loader_style
from analysis.report_blocks import Block, Report, add_figure, columns_shown, in_unit, percent, with_memory


def scaling(cell_table: pd.DataFrame, *, mode: str = "weak", baseline_world_size: int | None = None) -> pd.DataFrame:
    """Add speedup, efficiency and baseline_gpus per scaling curve. A curve is the cells that differ
    only in their size: `group_hash` (weak: fixed per-GPU batch) or `strong_group_hash` (strong: fixed
    global batch). Its baseline N0 is its smallest GPU count (or `baseline_world_size`); a curve
    without a run at N0, or with a single GPU count, has no efficiency (NaN), never a made-up 100%.

    weak: efficiency = per_gpu_img_s(N) / per_gpu_img_s(N0), speedup = that x N/N0.
    strong: speedup = time(N0) / time(N) = throughput(N) / throughput(N0) for the same work,
    efficiency = speedup x N0 / N. Several node layouts at N0: the fastest is the baseline.
    Either way speedup = throughput(N) / throughput(N0) and efficiency = speedup x N0 / N.
    """
    if mode not in ("weak", "strong"):
        raise ValueError(f"mode={mode!r}: use 'weak' or 'strong'")
    key = "group_hash" if mode == "weak" else "strong_group_hash"
    out = cell_table.copy()
    if key not in out:  # tables without run keys: the shown columns stand in
        shown = SCALING_GROUP if mode == "weak" else [*SCALING_GROUP[:-1], "global_batch"]
        out[key] = pd.util.hash_pandas_object(out[[c for c in shown if c in out]].astype("string"), index=False)
    keys = out[key]
    sizes = out.groupby(keys, dropna=False)["world_size"].transform("nunique")
    n0 = (
        out.groupby(keys, dropna=False)["world_size"].transform("min")
        if baseline_world_size is None
        else pd.Series(baseline_world_size, index=out.index)
    )
    at_n0 = out["world_size"] == n0
    base_thr = out["throughput_img_s"].where(at_n0).groupby(keys, dropna=False).transform("max")
    base_thr = base_thr.where(sizes > 1)
    ratio = (out["throughput_img_s"] / base_thr).astype("float64")
    out["baseline_gpus"] = n0.where(base_thr.notna()).astype("Int64")
    out["speedup"] = ratio
    out["efficiency"] = ratio / (out["world_size"] / n0).astype("float64")
    out["scaling"] = mode
    batch = "per_gpu_batch" if mode == "weak" else "global_batch"
    order = [c for c in [*SCALING_GROUP[:-1], batch, "variant", "world_size", "num_nodes"] if c in out]
    return out.sort_values(order).reset_index(drop=True)


@paper_style
def throughput_vs_gpus(cells: pd.DataFrame) -> Figure:
    """Throughput (img/s) vs GPUs (or CPU ranks: the cells' `device`), log-log, one panel per model, one
    curve per configuration in a colour of its own, each with its ideal (linear) line from its smallest GPU
    count, dashed in the same colour; error bars are the repeat CI if present."""
    models = model_names(cells)
    words = rank_words(cells)
    fig, axes = panels(len(models))
    for ax, model in zip(axes, models):
        rows_m = cells[cells["model"] == model]
        drawn, shared = curves(rows_m)
        for c in drawn:
            rows, color = c.line, c.color
            x, y = rows["world_size"].to_numpy(float), rows["throughput_img_s"].to_numpy(float)
            extra_points(ax, c.extra, "throughput_img_s", color=color, marker=c.marker)
            if "throughput_img_s_ci_low" in rows and rows["throughput_img_s_ci_low"].notna().any():
                err = np.vstack(
                    [
                        y - rows["throughput_img_s_ci_low"].fillna(pd.Series(y, index=rows.index)),
                        rows["throughput_img_s_ci_high"].fillna(pd.Series(y, index=rows.index)) - y,
                    ]
                )
                ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt="none", ecolor=color, elinewidth=0.8, capsize=2)
            ax.plot(x, y, loader_style(c.loader)[0], marker=c.marker, color=color, label=c.label)
            if len(x) > 1:
                ax.plot(
                    x, y[0] * x / x[0], color=color, linestyle=IDEAL_DASHES, linewidth=0.8, alpha=0.8, label="_ideal"
                )
        ax.plot([], [], color=IDEAL_COLOR, linestyle=IDEAL_DASHES, linewidth=0.8, label=IDEAL_LABEL)
        gpu_axis(ax, rows_m["world_size"], log_y=True, label=words.axis)
        low, high = ax.get_ylim()
        if high / low < 8:  # less than a decade: 1-2-5 ticks would leave one label
            ax.yaxis.set_major_locator(MaxNLocator(5))
        ax.set_title(panel_title(pretty(model), shared))
        ax.set_ylabel(f"throughput ({_rate(rows_m)})")
    return finish(fig, axes, legend_cols=legend_columns(axes))


def _rate(rows: pd.DataFrame) -> str:
    """The throughput unit of one panel's cells (their sample_unit, images where the table has none)."""
    from benchmarks.models.configs import RATE_LABELS

    units = sorted(set(rows["sample_unit"].dropna().astype(str))) if "sample_unit" in rows else []
    if len(units) > 1:  # one axis never mixes units: callers split by sample_unit first
        raise ValueError(f"one panel holds cells of several sample units ({', '.join(units)})")
    unit = units[0] if units else "images"
    return RATE_LABELS.get(unit, f"{unit}/s")


@paper_style
def efficiency_vs_gpus(scaled: pd.DataFrame) -> Figure:
    """Scaling efficiency (%) vs GPUs (or CPU ranks), one panel per model, one curve per configuration in a
    colour of its own (the throughput figure's)."""
    models = model_names(scaled)
    words = rank_words(scaled)
    fig, axes = panels(len(models), sharey=True)
    for ax, model in zip(axes, models):
        rows_m = scaled[scaled["model"] == model]
        mode = scaled["scaling"].iloc[0] if "scaling" in scaled else "weak"
        drawn, shared = curves(rows_m, curve="strong_group_hash" if mode == "strong" else "group_hash")
        for c in drawn:
            if c.line["efficiency"].notna().sum() == 0:
                continue  # a configuration at one GPU count: no baseline, no efficiency
            style = loader_style(c.loader)[0]
            ax.plot(
                c.line["world_size"], 100 * c.line["efficiency"], style, marker=c.marker, color=c.color, label=c.label
            )
            extra_points(ax, c.extra, "efficiency", color=c.color, marker=c.marker, scale=100)
        ax.axhline(100, color=IDEAL_COLOR, linewidth=0.8, linestyle=IDEAL_DASHES, label="ideal (100%)")
        gpu_axis(ax, rows_m["world_size"], label=words.axis)
        top = np.nanmax([110.0, *(100 * rows_m["efficiency"].dropna() + 5)])
        ax.set_ylim(0, top)
        ax.yaxis.set_major_formatter(PercentFormatter())
        baselines = sorted({int(b) for b in rows_m["baseline_gpus"].dropna()}) if "baseline_gpus" in rows_m else []
        base = (
            f"vs {', '.join(map(str, baselines))} {words.one if baselines == [1] else words.many}"
            if baselines
            else f"no smaller {words.one} count: no efficiency"
        )
        ax.set_title(panel_title(f"{pretty(model)} ({mode} scaling, {base})", shared))
        ax.set_ylabel("efficiency")
    return finish(fig, axes, legend_cols=legend_columns(axes))


@paper_style
def dali_vs_native(cells: pd.DataFrame) -> Figure:
    """DALI throughput / native throughput vs GPUs, one panel per model, one curve per framework (and per
    precision, batch and non-loader variant where those differ): a DALI cell is paired with the native
    cell that has the same settings apart from the loader's own."""
    frame = cells.assign(pair=pair_variant(cells)) if "variant" in cells else cells.assign(pair="")
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
    models = model_names(ratio) if not ratio.empty else ["(no DALI/native pairs)"]
    fig, axes = panels(len(models))
    for ax, model in zip(axes, models):
        rows_m = ratio[ratio["model"] == model]
        curve = [c for c in ("framework", "precision", "per_gpu_batch", "pair") if c in rows_m]
        varying = [c for c in curve[1:] if rows_m[c].nunique() > 1]
        groups = list(rows_m.groupby(curve, sort=True))
        colors = curve_colors([tuple(map(str, key)) for key, _ in groups])
        for key, rows in groups:
            color = colors[tuple(map(str, key))]
            key = dict(zip(curve, key))
            rows = rows.sort_values(["world_size", "num_nodes"]).drop_duplicates("world_size")
            label = pretty(key["framework"]) + "".join(f", {SHORT_NAMES.get(c, '')}{key[c]}" for c in varying)
            ax.plot(rows["world_size"], rows["ratio"], "-", marker="o", color=color, label=label)
        ax.axhline(1.0, color=IDEAL_COLOR, linewidth=0.8, linestyle=IDEAL_DASHES)
        if not rows_m.empty:
            gpu_axis(ax, rows_m["world_size"], label=rank_words(cells).axis)
        ax.set_title(pretty(model))
        ax.set_ylabel("DALI / native throughput")
    return finish(fig, axes)


@paper_style
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
    fig, axes = panels(len(sizes), row_height_in=2.3)
    keys = [c for c in ["framework", "loader", "precision", "per_gpu_batch", "variant"] if c in frame]
    varying = [c for c in keys[2:] if frame[c].nunique() > 1]
    series = sorted(frame.groupby(keys).groups)  # one bar series per configuration but the model
    width = 0.8 / max(1, len(series))
    for ax, size in zip(axes, sizes):
        rows_s = frame[frame["world_size"] == size]
        models = model_names(rows_s)
        x = np.arange(len(models))
        for i, key in enumerate(series):
            key = dict(zip(keys, key))
            mask = np.logical_and.reduce([rows_s[c] == v for c, v in key.items()])
            rows = rows_s[mask].set_index("model")
            values = rows["per_gpu_img_s"].reindex(models).to_numpy(float)
            label = f"{pretty(key['framework'])}, {pretty(key['loader'])}" + "".join(
                f", {SHORT_NAMES.get(c, '')}{key[c]}" for c in varying if key[c]
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
        words = rank_words(rows_s)
        ax.set_title(words.count(size))
        ax.set_ylabel(f"{_rate(frame)} per {words.per}")
        ax.grid(axis="x", visible=False)
    return finish(fig, axes)


# the columns each table shows (the markdown's order: what `results` prints, what greps of report.md read) and
# its key figures, shown first in the HTML
SCALING_COLUMNS = [
    *CELL,
    "device",
    "variant",
    "num_repeats",
    "throughput_img_s",
    "throughput_img_s_ci_low",
    "throughput_img_s_ci_high",
    "per_gpu_img_s",
    "efficiency",
    "baseline_gpus",
    *MEMORY,
]

SCALING_KEY = ("throughput_img_s", "per_gpu_img_s", "efficiency_pct")  # named in each table's unit (_in_unit)
ONE_REPEAT = "1 repeat: no interval"  # what an interval column says of a cell run once
CLOSE_PAIRS_SHOWN = 8  # the closest pairs the warning names; the rest are counted


def run_to_run_spread(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per cell with two repeats or more: num_repeats and spread, the range of its repeats' throughput over
    their median, (max - min) / median: how far two runs of one configuration on one machine land apart."""
    if per_run.empty or "cell_hash" not in per_run:
        return pd.DataFrame(columns=["cell_hash", "num_repeats", "spread"])
    stats = per_run.groupby("cell_hash", observed=True)["throughput_img_s"].agg(["min", "max", "median", "size"])
    stats = stats[stats["size"] > 1]
    return pd.DataFrame(
        {
            "cell_hash": stats.index.astype(str),
            "num_repeats": stats["size"].to_numpy(),
            "spread": ((stats["max"] - stats["min"]) / stats["median"]).to_numpy(float),
        }
    )


def close_pairs(cells: pd.DataFrame, spread: float) -> pd.DataFrame:
    """Pairs of cells a table sets side by side (one model, sample unit and size: world size and nodes)
    whose throughputs differ by less than `spread` (|a - b| / the larger): a difference the run-to-run spread
    could make. Columns: model, world_size, num_nodes, a, b (what tells the two apart), rel_diff; closest first."""
    rows = []
    by = [c for c in ("model", "sample_unit", "world_size", "num_nodes") if c in cells]
    for key, group in cells.groupby(by, sort=True):
        group = group.reset_index(drop=True)
        described = _what_differs(group)
        values = group["throughput_img_s"].to_numpy(float)
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                diff = abs(values[i] - values[j]) / max(values[i], values[j])
                if diff < spread:
                    rows.append({**dict(zip(by, key)), "a": described[i], "b": described[j], "rel_diff": diff})
    out = pd.DataFrame(rows, columns=[*by, "a", "b", "rel_diff"])
    return out.sort_values("rel_diff", kind="stable").reset_index(drop=True)


def _what_differs(group: pd.DataFrame) -> list[str]:
    """Each cell of a group by what tells it from the others: the cell's columns and variant that differ."""
    columns = [c for c in ("framework", "loader", "precision", "per_gpu_batch", "variant") if c in group]
    varying = [c for c in columns if group[c].astype(str).nunique() > 1]
    return [
        ", ".join(f"{pretty(row[c])}" if c != "per_gpu_batch" else f"b{row[c]}" for c in varying if str(row[c]))
        or "another cell"
        for _, row in group.iterrows()
    ]


def noise_text(cells: pd.DataFrame, per_run: pd.DataFrame) -> str:
    """What the run-to-run spread says of the table: measured from repeats, the spread and the pairs of cells
    closer than it; without repeats, that one repeat cannot show the spread."""
    spreads = run_to_run_spread(per_run)
    if spreads.empty:
        return (
            "Noise: every cell ran once (1 repeat: no interval). One repeat cannot show the run-to-run spread, so "
            "no difference between two cells here can be told from noise; repeat the cells (run.repeat=1, then "
            "2, ...) to measure it."
        )
    spread = float(spreads["spread"].median())
    text = (
        f"Noise: the run-to-run spread measured here is {spread:.1%}: the median, over the {len(spreads)} "
        f"cell{'s' if len(spreads) != 1 else ''} with repeats, of the range of a cell's repeats' throughput over "
        "their median, (max - min) / median."
    )
    pairs = close_pairs(cells, spread)
    if pairs.empty:
        return text + " No two cells of one model and size differ by less than that."
    words = rank_words(cells)
    shown = [
        f"{row.model}, {words.count(row.world_size)}: {row.a} vs {row.b} differ by {row.rel_diff:.1%}"
        for row in pairs.head(CLOSE_PAIRS_SHOWN).itertuples(index=False)
    ]
    more = len(pairs) - len(shown)
    return (
        text
        + f" Closer than that, so within the noise ({len(pairs)} pair{'s' if len(pairs) != 1 else ''}): "
        + "; ".join(shown)
        + (f"; and {more} more." if more else ".")
    )


def with_intervals_said(table: pd.DataFrame) -> pd.DataFrame:
    """A table's interval columns (*_ci_low, *_ci_high) say "1 repeat: no interval" for a cell run once,
    where they would be blank."""
    lows = [c for c in table if str(c).endswith("_ci_low")]
    if not lows or "num_repeats" not in table:
        return table
    table = table.copy()
    once = pd.to_numeric(table["num_repeats"], errors="coerce") < 2
    for low in lows:
        high = low.replace("_ci_low", "_ci_high")
        table[low] = table[low].astype(object).where(~once, ONE_REPEAT)
        if high in table:
            table[high] = table[high].astype(object).where(~once, "")
    return table


def draw(report: Report) -> None:
    if not report.measured:
        return
    blocks, figures, mode = report.blocks, report.figures, report.scaling
    cells = report.cells
    scaled = with_device(with_sample_unit(report.analysis.scaling(mode), report.counted), report.counted)
    words = rank_words(scaled)
    mixed = device_of(scaled) == MIXED
    blocks.append(Block("heading", f"Throughput and {mode} scaling"))
    baseline = "baseline_gpus" if words.column == "gpu" else f"baseline_{words.column}s"
    note = (
        f"efficiency_pct: {mode}-scaling efficiency against the same configuration on {baseline} {words.many}, "
        f"the smallest {words.one} count of its curve; empty where the curve has no smaller count.\n\n"
        + (f"world_size counts {words.many}; device: what a cell's ranks ran on.\n\n" if mixed else "")
        + f"throughput_img_s_ci_low..ci_high: the 95% Student-t interval of the mean over a cell's repeats; "
        f"'{ONE_REPEAT}' for a cell run once.\n\n"
        "peak_allocated_gib / peak_reserved_gib: the largest peak GPU memory over the cell's runs and ranks "
        "(torch.cuda.max_memory_allocated / max_memory_reserved over the whole run); '-' on CPU runs."
    )
    columns = SCALING_COLUMNS if mixed else [c for c in SCALING_COLUMNS if c != "device"]
    if device_of(scaled) == CPU:  # no GPU memory to show: every peak would read '-'
        columns = [c for c in columns if c not in MEMORY]
        note = note.rpartition("\n\npeak_allocated_gib")[0]
    units = scaled.groupby("sample_unit", sort=True)
    for k, (unit, rows) in enumerate(units, 1):
        if scaled["sample_unit"].nunique() > 1:
            blocks.append(Block("text", f"Models whose samples are {unit} ({rate_label(unit)}):"))
        table = percent(columns_shown(with_memory(rows, report.counted), columns), ["efficiency"])
        table = with_intervals_said(in_unit(table.rename(columns={"efficiency": "efficiency_pct"}), unit))
        key = tuple(c.replace("_img_s", rate_suffix(unit)) for c in SCALING_KEY)
        blocks.append(Block("table", table, note=note if k == len(units) else "", key=key))
    blocks.append(Block("text", noise_text(scaled, report.analysis.run_throughput())))
    add_figure(
        blocks,
        figures,
        "throughput_vs_gpus",
        lambda: throughput_vs_gpus(cells),
        f"Throughput vs {words.axis} (log-log), one curve per configuration, each in its colour; dashed, in the "
        f"curve's colour: ideal linear scaling from its smallest {words.one} count.",
    )
    if scaled["efficiency"].notna().any():
        add_figure(
            blocks,
            figures,
            "efficiency_vs_gpus",
            lambda: efficiency_vs_gpus(scaled),
            f"{mode.capitalize()}-scaling efficiency, one curve per configuration, against its smallest "
            f"{words.one} count.",
        )
    if {"dali", "native"} <= set(cells["loader"]):
        add_figure(
            blocks,
            figures,
            "dali_vs_native",
            lambda: dali_vs_native(cells),
            "DALI throughput relative to the native loader (above 1: DALI faster).",
        )
    for unit, rows in cells.groupby("sample_unit", sort=True):  # one axis, one sample unit
        if rows["model"].nunique() > 1:
            add_figure(
                blocks,
                figures,
                "framework_by_depth" + ("" if unit == DEFAULT_SAMPLE_UNIT else f"_{unit}"),
                lambda rows=rows: framework_by_depth(rows),
                f"Per-{words.per} throughput of each framework per model depth (hatched: DALI), models of {unit}.",
            )
