"""Data-parallel modes and precisions (seed study C's software comparison): each mode's throughput and memory
against the DDP fp32 baseline of its model, the bars, the report's section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from analysis.cells import CELL, peak_memory, rate_label, rate_suffix, sample_units, setting_text
from analysis.device import rank_words
from analysis.figures import finish, numbered, panels, paper_style, pretty, shared_parts
from analysis.palette import IDEAL_COLOR, framework_color
from analysis.report_blocks import Block, Report, add_figure, columns_shown

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


# training time is relative to this cell of each group: PyTorch DDP in full precision, plain optimizer
MODE_BASELINE = {"framework": "ddp", "precision": "fp32", "config.framework.zero_optimizer": False}
MODE_BASELINE_TEXT = "framework=ddp, precision=fp32, framework.zero_optimizer=false"
# what makes a mode: the framework's settings and the precision's; cells alike in everything else are one group
MODE_PREFIXES = ("config.framework.", "config.precision.")
MODE_ORDER = ("dp", "ddp", "fsdp", "deepspeed", "horovod")  # the study's order, simplest first

MODES = [
    "samples_s",
    "relative_time",
    "gpu_util_pct_mean",
    "gpu_util_pct_p95",
    "peak_allocated_gib",
    "peak_reserved_gib",
    "pcie_rx_gb_s_mean",
    "pcie_tx_gb_s_mean",
]


def mode_groups(runs: pd.DataFrame) -> pd.Series:
    """Per run (index: run_id as text), the hash of its run key without the mode's settings (MODE_PREFIXES:
    framework.*, precision.*): runs that share it differ in data-parallel mode and precision only."""
    from benchmarks.rundir.cell_identity import is_identity_key

    columns = [
        c
        for c in runs.columns
        if c.startswith("config.") and is_identity_key(c[len("config.") :]) and not c.startswith(MODE_PREFIXES)
    ]
    text = runs[columns].apply(setting_text) if columns else pd.DataFrame(index=runs.index)
    for size in ("world_size", "num_nodes"):
        if size in runs:
            text[size] = setting_text(runs[size])
    hashed = pd.util.hash_pandas_object(text, index=False) if len(text.columns) else pd.Series(0, index=runs.index)
    return pd.Series(hashed.map("{:016x}".format).to_numpy(), index=runs["run_id"].astype(str).to_numpy())


def _is_baseline(runs: pd.DataFrame) -> pd.Series:
    """Per run: whether it is the training-time baseline (MODE_BASELINE; a setting the run does not record,
    such as zero_optimizer before it existed, reads as off)."""
    hit = pd.Series(True, index=runs.index)
    for column, wanted in MODE_BASELINE.items():
        values = runs[column] if column in runs else pd.Series(None, index=runs.index, dtype="object")
        if isinstance(wanted, bool):
            values = values.astype("object").where(values.notna(), False).map(lambda v: str(v).lower() == "true")
            hit &= values == wanted
        else:
            hit &= values.astype("string").fillna("") == wanted
    return hit


def mode_cells(
    cell_table: pd.DataFrame, runs: pd.DataFrame, *, utilisation: pd.DataFrame, memory: pd.DataFrame
) -> pd.DataFrame:
    """Seed study C's comparison: per cell of every group of cells that differ only in data-parallel mode
    and precision (mode_groups) and that holds the baseline (MODE_BASELINE) and another cell: samples_s
    (the cell's throughput, in its sample_unit), relative_time (the baseline's samples_s over the cell's:
    the time to train the same samples, baseline = 1; NaN where the group holds several baseline cells),
    `mode` (the framework, and its ZeRO stage where it has one), `device` (system.device), GPU utilisation
    (utilisation_cells), peak GPU memory (peak_memory, GiB) and PCIe traffic. `cell_table`: cells(); `runs`:
    the counted runs."""
    columns = ["mode_group", *CELL, "variant", "mode", "sample_unit", "device", "num_repeats", "is_baseline", *MODES]
    if cell_table.empty or runs.empty or "cell_hash" not in cell_table:
        return pd.DataFrame(columns=columns)
    by_run = runs.assign(run_id=runs["run_id"].astype(str)).drop_duplicates("cell_hash").set_index("cell_hash")
    first = by_run.reindex(cell_table["cell_hash"].to_numpy())
    out = cell_table.copy()
    out["mode_group"] = mode_groups(first.reset_index()).to_numpy()
    out["sample_unit"] = sample_units(first.reset_index()).to_numpy()
    out["is_baseline"] = _is_baseline(first).to_numpy()
    device = first["config.system.device"] if "config.system.device" in first else pd.Series("", index=first.index)
    out["device"] = setting_text(device).to_numpy()
    stage = (
        first["config.framework.zero_stage"] if "config.framework.zero_stage" in first else pd.Series(index=first.index)
    )
    out["mode"] = [
        str(f) if pd.isna(s) else f"{f} ZeRO-{int(s)}" for f, s in zip(out["framework"], pd.to_numeric(stage))
    ]
    out["samples_s"] = out["throughput_img_s"].astype("float64")
    groups = out.groupby("mode_group")
    keep = (groups["cell_hash"].transform("size") > 1) & (groups["is_baseline"].transform("sum") > 0)
    out = out[keep].copy()
    if out.empty:
        return pd.DataFrame(columns=columns)
    baseline = out["samples_s"].where(out["is_baseline"]).groupby(out["mode_group"]).transform("max")
    single = out.groupby("mode_group")["is_baseline"].transform("sum") == 1
    out["relative_time"] = (baseline / out["samples_s"]).where(single)
    for table in (utilisation, memory):
        wanted = [c for c in MODES if c in table and c not in out]
        if wanted and "cell_hash" in table:
            out = out.merge(table[["cell_hash", *wanted]], on="cell_hash", how="left")
    for column in MODES:
        if column not in out:
            out[column] = np.nan
    order = {name: i for i, name in enumerate(MODE_ORDER)}
    out = out.assign(
        _model=out["model"].astype(str),
        _framework=out["framework"].map(lambda f: order.get(str(f), len(order))),
        _precision=out["precision"].astype(str) != "fp32",
    )
    out = out.sort_values(["_model", "mode_group", "_framework", "mode", "variant", "_precision", "precision"])
    return out[[c for c in columns if c in out]].reset_index(drop=True)


# the modes figure's panels (MODES' columns): column -> (title, x axis label); peak memory draws the
# reserved bytes as an outline around the allocated bar
MODE_PANELS = {
    "relative_time": ("training time (baseline = 1)", "x baseline"),
    "gpu_util_pct_mean": ("GPU util", "%, mean"),
    "peak_allocated_gib": ("peak GPU memory", "GiB"),
    "pcie_rx_gb_s_mean": ("PCIe rx (to GPU)", "GB/s, mean"),
    "pcie_tx_gb_s_mean": ("PCIe tx (from GPU)", "GB/s, mean"),
}

AMP_HATCH = "////"


# a mode as its users name it (the study's words): the framework, its ZeRO stage, DDP's ZeRO optimizer
MODE_NAMES = {"ddp": "DDP", "dp": "DataParallel", "fsdp": "FSDP2", "deepspeed": "DeepSpeed", "horovod": "Horovod"}
ZERO_OPTIMIZER = "framework.zero_optimizer"  # DDP with torch's ZeroRedundancyOptimizer: part of the mode's name


def mode_name(mode: str, framework: str, variant_parts: list[str]) -> str:
    """'DDP', 'DDP + ZeRO optimizer', 'FSDP2', 'DeepSpeed ZeRO-2': mode_cells' `mode` (the framework and its
    ZeRO stage) as users say it, DDP's ZeRO optimizer (a setting of the variant) named in it."""
    name = MODE_NAMES.get(framework, pretty(framework)) + (mode[len(framework) :] if mode.startswith(framework) else "")
    return name + (" + ZeRO optimizer" if f"{ZERO_OPTIMIZER}=True" in variant_parts else "")


def group_settings(rows: pd.DataFrame) -> list[str]:
    """The variant's settings every bar of a mode group shares (its system profile, say): left out of the
    bars' labels (mode_labels), for the figure's title."""
    variants = [str(v).split(", ") if isinstance(v, str) and v else [] for v in rows.get("variant", [])]
    return [p for p in shared_parts(variants) if not p.startswith(f"{ZERO_OPTIMIZER}=")] if len(rows) > 1 else []


def precision_name(precision: str, precisions: set[str]) -> str:
    """'' for full precision; '+ AMP' for mixed precision, its dtype named where the bars mix several."""
    if precision == "fp32":
        return ""
    if precision.startswith("amp_"):
        amps = {p for p in precisions if p.startswith("amp_")}
        return " + AMP" + (f" ({precision.removeprefix('amp_')})" if len(amps) > 1 else "")
    return f" + {precision}"


def mode_labels(rows: pd.DataFrame) -> list[str]:
    """One label per cell of a mode group, as users name it: its mode ("DDP + ZeRO optimizer", "FSDP2",
    "DeepSpeed ZeRO-2"), "+ AMP" for mixed precision, and the settings of its variant that tell it apart,
    less what every bar shares (a system profile) and what the name says already; cells that would still
    read alike are numbered, so none is hidden."""
    variants = [
        [p for p in str(v).split(", ") if p] if isinstance(v, str) else []
        for v in rows.get("variant", [""] * len(rows))
    ]
    shared = set(shared_parts(variants)) if len(rows) > 1 else set()
    precisions = set(rows["precision"].astype(str))
    labels = []
    for row, parts in zip(rows.itertuples(index=False), variants):
        label = mode_name(str(row.mode), str(row.framework), parts) + precision_name(str(row.precision), precisions)
        rest = [p for p in parts if p not in shared and not p.startswith(f"{ZERO_OPTIMIZER}=")]
        labels.append(label + (f" [{', '.join(rest)}]" if rest else ""))
    return numbered(labels)


@paper_style
def mode_bars(rows: pd.DataFrame, *, title: str) -> Figure:
    """One mode group (mode_cells: cells alike but in mode and precision): a panel per figure that
    some cell has (MODE_PANELS), one horizontal bar per cell in each, labelled on the left with its full
    configuration (colour = framework, hatched = AMP). Training time has the baseline's 1 dashed; peak
    memory is allocated (filled) inside reserved (outline)."""
    rows = rows.reset_index(drop=True)
    shown = [c for c in MODE_PANELS if c in rows and rows[c].notna().any()]
    labels = mode_labels(rows)
    fig, axes = panels(
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
        name = MODE_NAMES.get(str(framework), pretty(framework))
        axes[0].add_patch(Rectangle((0, 0), 0, 0, color=framework_color(framework), label=name))
    if any(hatches):
        axes[0].add_patch(Rectangle((0, 0), 0, 0, facecolor="white", edgecolor="#555555", hatch=AMP_HATCH, label="AMP"))
    if "peak_allocated_gib" in shown and rows["peak_reserved_gib"].notna().any():
        axes[0].add_patch(
            Rectangle((0, 0), 0, 0, facecolor="none", edgecolor="#555555", linewidth=0.6, label="reserved (outline)")
        )
    left_in = min(3.2, 0.3 + 0.042 * max((len(label) for label in labels), default=0))
    return finish(fig, axes, title=title, left_in=left_in)


def modes_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis, cells: pd.DataFrame) -> None:
    """Seed study C's comparison, where cells differ only in data-parallel mode and precision and one of
    them is the baseline: a table per sample unit (throughput in img/s or seq/s, never mixed) and a figure
    per group of training time relative to the baseline, GPU utilisation, peak memory and PCIe traffic."""
    counted = analysis.counted()
    table = mode_cells(cells, counted, utilisation=analysis.utilisation(), memory=peak_memory(counted))
    if table.empty:
        return
    blocks.append(Block("heading", "Modes and precisions"))
    note = (
        "Cells that differ only in data-parallel mode (framework and its settings) and precision, one group "
        "per model and size. relative_time: the time to train the same samples against the group's "
        f"baseline, PyTorch DDP in full precision without the ZeRO optimizer ({MODE_BASELINE_TEXT}) "
        "= 1.0: the baseline's throughput over the cell's (below 1: faster; empty where a group holds "
        "several baseline cells). mode: the framework and its ZeRO stage where it has one; variant: the "
        "settings that tell alike cells apart (framework.zero_optimizer=True: DDP with torch's "
        "ZeroRedundancyOptimizer). GPU utilisation and PCIe rx/tx (host to GPU / GPU to host, GB = 1e9 "
        "bytes) are means over the telemetry samples of the whole run (see Utilisation); peak memory the "
        "largest torch.cuda peak over the cell's runs and ranks (GiB). Throughput is in each model's "
        "sample unit (summary.json's sample_unit: images, or sequences), one table per unit."
    )
    units = table.groupby("sample_unit", sort=True)
    for k, (unit, rows) in enumerate(units, 1):
        shown = columns_shown(rows, MODES_SHOWN)
        shown = shown[[c for c in shown if c not in MODES or shown[c].notna().any()]]
        rate = f"throughput{rate_suffix(unit)}"
        if table["sample_unit"].nunique() > 1:
            blocks.append(Block("text", f"Models whose samples are {unit} ({rate_label(unit)}):"))
        blocks.append(
            Block(
                "table",
                shown.rename(columns={"samples_s": rate}).round(2),
                note=note if k == len(units) else "",
                key=("relative_time", rate),
            )
        )
    for k, (_, rows) in enumerate(table.groupby("mode_group", sort=False)):
        first = rows.iloc[0]
        words = rank_words(first["device"])
        shared = group_settings(rows)
        title = (
            f"{first['model']}, {words.count(first['world_size'])} on "
            f"{first['num_nodes']} node{'s' if first['num_nodes'] != 1 else ''}, {first['per_gpu_batch']} "
            f"{first['sample_unit']} per {words.one}, {first['loader']}" + "".join(f", {p}" for p in shared)
        )
        add_figure(
            blocks,
            figures,
            f"modes_{k}",
            lambda rows=rows, title=title: mode_bars(rows, title=title),
            f"Modes and precisions, {title}: training time relative to the baseline, PyTorch DDP fp32 without the "
            f"ZeRO optimizer ({MODE_BASELINE_TEXT}) = 1.0 (dashed), then what each cell's telemetry and "
            "memory peaks have: GPU utilisation, peak GPU memory (filled: allocated, outline: reserved), PCIe rx "
            "and tx. One bar per cell, labelled with its mode as users name it (DDP + ZeRO optimizer: DDP with "
            "torch's ZeroRedundancyOptimizer), + AMP for mixed precision, and what else tells it apart; colour: "
            "framework, hatched: AMP.",
        )


MODES_SHOWN = [
    "model",
    "loader",
    "world_size",
    "num_nodes",
    "per_gpu_batch",
    "mode",
    "precision",
    "variant",
    "num_repeats",
    *MODES,
]


def draw(report: Report) -> None:
    if report.measured:
        modes_section(report.blocks, report.figures, report.analysis, report.cells)
