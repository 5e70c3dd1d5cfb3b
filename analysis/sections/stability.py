"""Step-time stability: slow steps per cell, ranks out of step, a loader that fell behind, and the step-time
timeline of the runs that lose the most time to slow steps."""

from __future__ import annotations

from analysis import metrics, plots
from analysis.sections.base import Block, Report, add_figure, columns_shown, table_if_rows


def draw(report: Report) -> None:
    if not report.measured:
        return
    analysis, blocks = report.analysis, report.blocks
    stability = analysis.step_stability()
    blocks.append(Block("heading", "Step-time stability (slowest rank per step)", 3))
    blocks.append(
        Block(
            "table",
            columns_shown(stability, [*metrics.CELL, "variant", *metrics.STABILITY]).round(1),
            note=(
                f"Slow steps take more than {metrics.SLOW_STEP_FACTOR:g} x their run's median; slow_time_pct is "
                "the time they took beyond the median, as a share of all step time (what the run would gain if "
                "every step ran at its median)."
            ),
            key=tuple(metrics.STABILITY),
        )
    )
    table_if_rows(
        blocks,
        analysis.rank_imbalance(),
        (
            "Per phase, the slowest rank's median against the fastest rank's (gaps of 1 ms "
            "or more). The ranks wait for each other in backward's all-reduce, so the first phase listed for "
            "a run points at the slow rank; a bwd gap after it is the others waiting."
        ),
        title="Ranks out of step",
        key=("gap_ms",),
    )


def draw_loader_stalls(report: Report) -> None:
    if not report.measured:
        return
    table_if_rows(
        report.blocks,
        report.analysis.loader_stalls(),
        (
            f"Runs whose host waited in the loader for at least "
            f"{metrics.LOADER_STALL_SHARE:.0%} of their step time (host_data_pct), against what the device saw "
            f"(data_pct); waiting_steps_pct counts the rank-steps that waited over "
            f"{metrics.LOADER_WAIT_FACTOR:.0%} of a median step. DALI on a GPU: check "
            f"CUDA_DEVICE_MAX_CONNECTIONS=32 (docs/dali.md); otherwise more loader threads or workers."
        ),
        title="Loader fell behind",
        key=("host_data_pct", "data_pct", "waiting_steps_pct"),
    )


def draw_timeline(report: Report) -> None:
    if not report.measured:
        return
    jittery = report.analysis.jittery_runs()
    if not jittery.empty:
        add_figure(
            report.blocks,
            report.figures,
            "step_timeline",
            lambda: plots.step_timeline(jittery, slow_factor=metrics.SLOW_STEP_FACTOR),
            "Step time over the measured steps of the runs that lose the most time to slow steps.",
        )
