"""Throughput and scaling: a table per sample unit (with peak memory), throughput and efficiency against
the GPU count, DALI against native, each framework per model depth."""

from __future__ import annotations

from analysis import metrics, plots
from analysis.sections.base import Block, Report, add_figure, columns_shown, in_unit, percent, with_memory

# the columns each table shows (the markdown's order: what `results` prints, what greps of report.md read) and
# its key figures, shown first in the HTML
SCALING_COLUMNS = [
    *metrics.CELL,
    "variant",
    "num_repeats",
    "throughput_img_s",
    "throughput_img_s_ci_low",
    "throughput_img_s_ci_high",
    "per_gpu_img_s",
    "efficiency",
    "baseline_gpus",
    *metrics.MEMORY,
]


SCALING_KEY = ("throughput_img_s", "per_gpu_img_s", "efficiency_pct")  # named in each table's unit (_in_unit)


def draw(report: Report) -> None:
    if not report.measured:
        return
    blocks, figures, scaling = report.blocks, report.figures, report.scaling
    cells = report.cells
    scaled = metrics.with_sample_unit(report.analysis.scaling(scaling), report.counted)
    blocks.append(Block("heading", f"Throughput and {scaling} scaling"))
    note = (
        f"efficiency_pct: {scaling}-scaling efficiency against the same configuration on baseline_gpus GPUs, the "
        "smallest GPU count of its curve; empty where the curve has no smaller GPU count.\n\n"
        "peak_allocated_gib / peak_reserved_gib: the largest peak GPU memory over the cell's runs and ranks "
        "(torch.cuda.max_memory_allocated / max_memory_reserved over the whole run); '-' on CPU runs."
    )
    units = scaled.groupby("sample_unit", sort=True)
    for k, (unit, rows) in enumerate(units, 1):
        if scaled["sample_unit"].nunique() > 1:
            blocks.append(Block("text", f"Models whose samples are {unit} ({metrics.rate_label(unit)}):"))
        table = percent(columns_shown(with_memory(rows, report.counted), SCALING_COLUMNS), ["efficiency"])
        table = in_unit(table.rename(columns={"efficiency": "efficiency_pct"}), unit)
        key = tuple(c.replace("_img_s", metrics.rate_suffix(unit)) for c in SCALING_KEY)
        blocks.append(Block("table", table, note=note if k == len(units) else "", key=key))
    add_figure(
        blocks,
        figures,
        "throughput_vs_gpus",
        lambda: plots.throughput_vs_gpus(cells),
        "Throughput vs GPUs (log-log), one curve per configuration; dotted: ideal linear scaling from each "
        "curve's smallest GPU count.",
    )
    if scaled["efficiency"].notna().any():
        add_figure(
            blocks,
            figures,
            "efficiency_vs_gpus",
            lambda: plots.efficiency_vs_gpus(scaled),
            f"{scaling.capitalize()}-scaling efficiency, one curve per configuration, against its smallest GPU count.",
        )
    if {"dali", "native"} <= set(cells["loader"]):
        add_figure(
            blocks,
            figures,
            "dali_vs_native",
            lambda: plots.dali_vs_native(cells),
            "DALI throughput relative to the native loader (above 1: DALI faster).",
        )
    for unit, rows in cells.groupby("sample_unit", sort=True):  # one axis, one sample unit
        if rows["model"].nunique() > 1:
            add_figure(
                blocks,
                figures,
                "framework_by_depth" + ("" if unit == metrics.DEFAULT_SAMPLE_UNIT else f"_{unit}"),
                lambda rows=rows: plots.framework_by_depth(rows),
                f"Per-GPU throughput of each framework per model depth (hatched: DALI), models of {unit}.",
            )
