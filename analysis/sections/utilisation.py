"""What each cell's GPUs, their links and its hosts were doing (telemetry)."""

from __future__ import annotations

from analysis import metrics, plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.sections.base import Block, Report, add_figure, columns_shown

UTILISATION_SHOWN = [*metrics.CELL, "variant", "num_repeats", *metrics.UTILISATION]


UTILISATION_KEY = ("gpu_util_pct_mean", "gpu_util_pct_p95", "cpu_pct_mean")


def utilisation_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Per cell, what the GPUs, their links and the hosts were doing (telemetry), where counted runs have it."""
    table = analysis.utilisation()
    if table.empty:
        return
    shown = columns_shown(table, UTILISATION_SHOWN)
    shown = shown[[c for c in shown if c not in metrics.UTILISATION or shown[c].notna().any()]]
    blocks.append(Block("heading", "Utilisation"))
    blocks.append(Block("text", "Per cell, what its GPUs, their links and its hosts were doing (telemetry)."))
    blocks.append(
        Block(
            "table",
            shown.round(1),
            key=UTILISATION_KEY,
            note=(
                "From the telemetry samples (benchmarks/telemetry.py) over the whole run, sampler start to stop "
                "(start-up, warm-up and evaluations included: the rank logs carry no wall-clock times to match the "
                "measured window to), mean over the cell's repeats with telemetry (num_repeats). GPU figures pool "
                "every GPU's samples; p95 is the 95th percentile of the samples; peaks are the largest sample. "
                "CPU % and host memory are host-wide, one rank per host. GB = 1e9 bytes; PCIe rx is host to GPU. "
                "A column no sample has (NVLink without its counters, GPU fields without NVML) is left out."
            ),
        )
    )
    if any(c in shown for c in plots.UTILISATION_PANELS):
        add_figure(
            blocks,
            figures,
            "utilisation",
            lambda: plots.utilisation_bars(table),
            "Utilisation per configuration over the whole run (one bar per cell; colour: framework, hatched: DALI).",
        )


def draw(report: Report) -> None:
    utilisation_section(report.blocks, report.figures, report.analysis)
