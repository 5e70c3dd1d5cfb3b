"""How close to the hardware, and at what energy: each cell's MFU, achieved TFLOPS per GPU, energy per sample
and average power (summary.json: app._efficiency, summary_schema.energy_fields), the figures of MFU and energy per
sample against GPUs, and the report's section. Where no cell has a figure, the runs' own reason says why
(mfu_note: "CPU: no peak table", a GPU without a peak row; energy_note: no NVML, no readable RAPL)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from analysis.cells import cell_key
from analysis.figures import curves, finish, gpu_axis, panels, paper_style
from analysis.report_blocks import Block, Report, add_figure

FIGURES = ["mfu", "achieved_tflops_per_gpu", "energy_j_per_sample", "avg_power_w", "host_energy_j"]
NOTES = {"mfu": "mfu_note", "energy_j_per_sample": "energy_note"}


def cell_efficiency(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell (cell_key) the mean over its runs of FIGURES, NaN where no run has one."""
    by = cell_key(runs)
    present = runs.reindex(columns=[*by, *FIGURES])
    for column in FIGURES:
        present[column] = pd.to_numeric(present[column], errors="coerce").astype("float64")
    return present.groupby(by, dropna=False, observed=True)[FIGURES].mean().reset_index()


def with_efficiency(cell_table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """cell_table with each cell's FIGURES (cell_efficiency) beside its own columns."""
    by = cell_key(cell_table)
    if not set(by) <= set(runs) or runs.empty:
        return cell_table.assign(**{c: float("nan") for c in FIGURES})
    return cell_table.merge(cell_efficiency(runs), on=by, how="left")


def why_none(runs: pd.DataFrame, figure: str) -> str | None:
    """Why no run has `figure` (mfu, energy_j_per_sample): the runs' distinct notes, None where some run has
    it or no run says (summaries from before the field)."""
    values = pd.to_numeric(runs.get(figure, pd.Series(dtype="float64")), errors="coerce")
    if values.notna().any() or NOTES[figure] not in runs:
        return None
    notes = [n for n in dict.fromkeys(runs[NOTES[figure]]) if isinstance(n, str) and n]
    return "; ".join(notes) or None


@paper_style
def efficiency_vs_gpus(cells: pd.DataFrame, *, columns: list[str], axis_label: str = "GPUs") -> Figure:
    """One panel per figure of `columns` (mfu in percent, energy_j_per_sample), one curve per configuration."""
    titles = {"mfu": "MFU (%)", "energy_j_per_sample": "energy per sample (J)"}
    fig, axes = panels(len(columns), ncols=2)
    for ax, column in zip(axes, columns):
        rows = cells[cells[column].notna()]
        scale = 100.0 if column == "mfu" else 1.0
        found, _ = curves(rows)
        for curve in found:
            ax.plot(curve.line["world_size"], curve.line[column] * scale, marker=curve.marker, color=curve.color,
                    label=curve.label)  # fmt: skip
        gpu_axis(ax, rows["world_size"], label=axis_label)
        ax.set_title(titles[column])
        ax.set_ylim(bottom=0)
    return finish(fig, axes, title="How close to the hardware, and at what energy")


TABLE = ["model", "framework", "loader", "precision", "world_size", "efficiency", *FIGURES]


def draw(report: Report) -> None:
    if not report.measured:
        return
    runs = report.counted
    scaled = with_efficiency(report.analysis.scaling(report.scaling), runs)
    shown = [c for c in FIGURES if scaled[c].notna().any()]
    reasons = {f: why_none(runs, f) for f in NOTES}
    if not shown and not any(reasons.values()):
        return  # summaries from before these fields: nothing to say
    report.blocks.append(Block("heading", "MFU and energy"))
    for figure, reason in reasons.items():
        if reason:
            what = "MFU" if figure == "mfu" else "energy"
            report.blocks.append(Block("text", f"No {what} figure: {reason}."))
    if not shown:
        return
    table = scaled[[c for c in TABLE if c in scaled and (c not in FIGURES or c in shown)]].copy()
    for column in ("efficiency", "mfu"):
        if column in table:
            table[f"{column}_pct"] = (100 * table.pop(column)).round(1)
    note = (
        "mfu_pct: model FLOPs per sample (forward + backward, torch.utils.flop_counter on the meta device) x "
        "samples per second per GPU over the GPU's dense peak for the run's math (benchmarks/peaks.py, each "
        "row with its datasheet); achieved_tflops_per_gpu: the numerator. efficiency_pct: scaling efficiency, "
        "for comparison.\n\nenergy_j_per_sample: NVML's total-energy counter read at the measured window's "
        "start and end on every GPU, summed over ranks, over the window's samples; avg_power_w: those joules "
        "over the window's wall time (all GPUs together); host_energy_j: the hosts' RAPL packages."
    )
    report.blocks.append(Block("table", table.round(3), note=note, key=("world_size", "mfu_pct")))
    plotted = [c for c in ("mfu", "energy_j_per_sample") if c in shown]
    if plotted:
        axis = report.words.axis
        add_figure(
            report.blocks,
            report.figures,
            "efficiency_vs_gpus",
            lambda: efficiency_vs_gpus(scaled, columns=plotted, axis_label=axis),
            f"MFU and energy per sample vs {axis}, one curve per configuration.",
        )
