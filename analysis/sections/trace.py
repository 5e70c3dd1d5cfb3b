"""The trace window's breakdown by kernel class (shares of step time and of the runtime), seed study A's
layout, and where the phase timers and the trace disagree."""

from __future__ import annotations

import pandas as pd

from analysis import metrics, plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.sections.base import Block, Report, add_figure, columns_shown
from analysis.sections.reference import REFERENCE_KEY

TRACE_CONFIG = [*metrics.CELL, "variant"]


# the window's classes that add up to 100% of its step time: the key figures of its table
TRACE_KEY = ("conv_pct", "gemm_pct", "other_compute_pct", "copies_pct", "comm_exposed_pct", "idle_pct")


# the seed's layout (study A's table: % of runtime) from the trace window: its column -> this campaign's
SEED_LAYOUT = {
    "allreduce_pct": "allreduce_exposed_runtime_pct",
    "data_pct": "data_runtime_pct",
    "cudnn_pct": "conv_runtime_pct",
}


def seed_layout(traced: pd.DataFrame, reference: pd.DataFrame | None) -> pd.DataFrame:
    """One row per traced cell in seed study A's layout: AllReduce % (exposed), data % and cuDNN %
    (convolution kernels) of the runtime, for every framework x loader x GPU count; with a reference,
    its values beside the PyTorch-DDP cells that match one of its cells (model, loader, GPUs)."""
    keep = [
        c
        for c in ["model", "framework", "loader", "world_size", "num_nodes", "precision", "per_gpu_batch", "variant"]
        if c in traced
    ]
    out = traced[keep].rename(columns={"world_size": "gpus"}).copy()
    for seed, here in SEED_LAYOUT.items():
        out[seed] = traced[here].astype("float64")
    if reference is not None:
        ref = reference.rename(columns={c: f"{c}_ref" for c in ("allreduce_pct", "data_pct", "compute_pct")})
        ddp = out["framework"] == "ddp"
        out = out.assign(gpus=out["gpus"].astype(int)).merge(ref, on=REFERENCE_KEY, how="left")
        for column in ("allreduce_pct_ref", "data_pct_ref", "compute_pct_ref"):
            out[column] = out[column].where(ddp.to_numpy())
    return out.sort_values(
        [c for c in ["model", "framework", "loader", "gpus"] if c in out],
        kind="stable",
        key=lambda col: col.map(plots._model_key) if col.name == "model" else col,
    ).reset_index(drop=True)


def trace_section(
    blocks: list[Block], figures: dict, analysis: CampaignAnalysis, reference: pd.DataFrame | None
) -> None:
    """The trace window's breakdown by kernel class (both denominators), the seed's layout, and where
    timers and trace disagree; nothing when no run has a trace window."""
    traced = analysis.trace_breakdown()
    if traced.empty:
        return
    blocks.append(Block("heading", "Where the time goes: the trace window"))
    blocks.append(
        Block(
            "table",
            columns_shown(traced, [*TRACE_CONFIG, *metrics.TRACE_SHARES, *metrics.TRACE_PERTURBATION]).round(3),
            key=TRACE_KEY,
            note=(
                "From each run's profiler window (run.trace: a few steps after the measured ones on every rank, on by "
                "default on GPUs; or run.profile_steps), kernels classified by name: cuDNN convolution (conv), GEMM, "
                "other compute, copies (h2d: host-to-device), collectives (allreduce: total, and exposed: not hidden "
                "behind compute or copies; comm: every collective) and idle. Shares of the window's step time, mean "
                "over ranks and repeats; compute + copies + exposed comm + idle = 100%. window_slowdown: the window's "
                "median step against the measured steps' (1.00: the profiler left the steps as they were; above, it "
                "slowed them: a host that records every op (an explicit window, or a CPU run) can fall behind the GPU, "
                "which then idles, so idle_pct is inflated by about 1 - 1/window_slowdown; the sampled window on GPUs "
                "records device activity only)."
            ),
        )
    )
    blocks.append(Block("heading", "The same as shares of the runtime", 3))
    blocks.append(
        Block(
            "table",
            columns_shown(traced, [*TRACE_CONFIG, *metrics.TRACE_RUNTIME]).round(1),
            key=tuple(metrics.TRACE_RUNTIME),
            note=(
                "Shares of the whole runtime (summary runtime_s: process start to the last step, so start-up "
                "and data loading count), which is how seed study A's table reads: a class's window share times the "
                "rank's step time over all its steps, over the runtime; data from the phase timers; start-up: what no "
                "step holds."
            ),
        )
    )
    add_figure(
        blocks,
        figures,
        "trace_breakdown",
        lambda: plots.trace_breakdown_bars(traced),
        "Where the time goes from the trace window: shares of step time (left) and of the runtime (right).",
    )
    layout = seed_layout(traced, reference)
    blocks.append(Block("heading", "In seed study A's layout", 3))
    blocks.append(
        Block(
            "table",
            layout.round(1),
            key=(*SEED_LAYOUT, "allreduce_pct_ref", "data_pct_ref", "compute_pct_ref"),
            note=(
                "% of runtime: allreduce_pct (exposed allreduce), data_pct (waiting for the "
                "batch), cudnn_pct (cuDNN convolution kernels), for each framework, loader and GPU count"
                + (
                    "; *_ref: the reference's PyTorch-DDP values where model, loader and GPU count match (its "
                    "compute_pct is cuDNN time)."
                    if reference is not None
                    else "; --reference aach2023 adds the study's values beside them."
                )
            ),
        )
    )
    disagree = analysis.timers_vs_trace()
    if not disagree.empty:
        far = disagree[disagree["disagreement_pp"] > metrics.DISAGREEMENT_PP]
        shown = [
            "run_id",
            "rank",
            "disagreement_pp",
            "worst",
            *[c for c in disagree.columns if c.endswith(("_timer_pct", "_trace_pct"))],
        ]
        if far.empty:
            blocks.append(
                Block(
                    "text",
                    (
                        f"Timers and trace agree within {metrics.DISAGREEMENT_PP:g} percentage points on every traced rank "
                        f"({len(disagree)}; largest {disagree['disagreement_pp'].max():.1f} pp)."
                    ),
                )
            )
        else:
            blocks.append(
                Block(
                    "text",
                    f"Timers and trace disagree by more than {metrics.DISAGREEMENT_PP:g} percentage points on "
                    f"{len(far)} of {len(disagree)} traced ranks: trust the trace for the split, the timers for the "
                    "step time.",
                )
            )
            blocks.append(
                Block(
                    "table",
                    far[shown].round(1),
                    note=(
                        "The same steps, pair by pair (*_timer_pct against *_trace_pct): compute <-> compute + "
                        "copies, exposed comm <-> exposed comm, data + other <-> idle, total comm <-> total comm "
                        "where timed; disagreement_pp: the largest difference, worst: its pair."
                    ),
                    key=("disagreement_pp", "worst"),
                )
            )


def draw(report: Report) -> None:
    if report.measured:
        trace_section(report.blocks, report.figures, report.analysis, report.reference)
