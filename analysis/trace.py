"""Where the time goes, from the profiler-trace window (breakdown_rank<R>.json): kernel-class shares with
two denominators, the timers against the trace, the window's slowdown; the bars; the report's section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from analysis.cells import CELL, measured, per_cell_mean
from analysis.device import with_device
from analysis.figures import cell_label_parts, cell_labels, model_key, panel_title, paper_style, shared_parts
from analysis.palette import FULL_WIDTH_IN, TRACE_COLORS
from analysis.reference_overlay import REFERENCE_KEY
from analysis.report_blocks import Block, Report, add_figure, columns_shown

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


# the trace breakdown's classes (benchmarks/tracereduce.py) as shares: column -> seconds column(s) of the
# traces table. compute = conv + gemm + other_compute; compute + copies + comm_exposed + idle = 1
TRACE_SHARES = {
    "allreduce_pct": "allreduce_s",
    "allreduce_exposed_pct": "allreduce_exposed_s",
    "comm_total_pct": "comm_total_s",
    "comm_exposed_pct": "comm_exposed_s",
    "conv_pct": "conv_s",
    "gemm_pct": "gemm_s",
    "other_compute_pct": "other_compute_s",
    "copies_pct": "memcpy_s",
    "h2d_pct": "h2d_s",
    "idle_pct": "idle_s",
}

TRACE_RUNTIME = [
    "allreduce_runtime_pct",
    "allreduce_exposed_runtime_pct",
    "conv_runtime_pct",
    "compute_runtime_pct",
    "data_runtime_pct",
    "startup_runtime_pct",
]

TRACE_PERTURBATION = ["window_slowdown"]
DISAGREEMENT_PP = 5.0  # timers and trace further apart than this (percentage points) are shown


def trace_breakdown_runs(traces: pd.DataFrame, steps: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per run with a trace window, where the time of its profiled steps went, by kernel class.

    Two denominators. `*_pct`: share of the window's step time, summed over ranks (TRACE_SHARES).
    `*_runtime_pct`: share of the run's runtime (summary runtime_s: process start to the last step, so
    start-up and data loading count), as seed study A's table reads: a class's window share times the
    rank's summed step_s over ALL its logged steps, over runtime_s (the window stands for every step);
    data_runtime_pct is the timers' data_s over all steps; startup_runtime_pct what no step holds.
    Ranks are averaged. Also the number of ranks traced, the window's steps per rank and its source."""
    if traces.empty:
        return pd.DataFrame(
            columns=[
                "run_id",
                "ranks_traced",
                "trace_steps",
                "trace_source",
                *TRACE_SHARES,
                *TRACE_RUNTIME,
                *TRACE_PERTURBATION,
            ]
        )
    sums = traces.groupby("run_id", observed=True).agg(
        ranks_traced=("rank", "nunique"),
        trace_steps=("steps", "max"),
        trace_source=("source", "first"),
        **{col: (col, "sum") for col in ["window_s", *dict.fromkeys(TRACE_SHARES.values()), "compute_s"]},
    )
    out = pd.DataFrame(
        {
            "run_id": sums.index.astype(str),
            "ranks_traced": sums["ranks_traced"].to_numpy(),
            "trace_steps": sums["trace_steps"].to_numpy(),
            "trace_source": sums["trace_source"].to_numpy(),
        }
    )
    for share, seconds in TRACE_SHARES.items():
        out[share] = (100 * sums[seconds] / sums["window_s"]).to_numpy()
    # per rank: all its step time and data time, then the mean over its ranks
    per_rank = steps.groupby(["run_id", "rank"], observed=True)[["step_s", "data_s"]].sum(min_count=1)
    per_run = per_rank.groupby(level="run_id", observed=True).mean()
    per_run.index = per_run.index.astype(str)
    runtime = runs.set_index("run_id")["runtime_s"] if "runtime_s" in runs else pd.Series(dtype="float64")
    steps_s = out["run_id"].map(per_run["step_s"]).astype("float64")
    data_s = out["run_id"].map(per_run["data_s"]).astype("float64")
    runtime_s = pd.to_numeric(out["run_id"].map(runtime), errors="coerce").astype("float64")
    runtime_s = runtime_s.where(runtime_s >= steps_s)  # a runtime shorter than its steps is none
    compute_pct = 100 * (sums["compute_s"] / sums["window_s"]).to_numpy()
    for name, pct in (
        ("allreduce_runtime_pct", out["allreduce_pct"]),
        ("allreduce_exposed_runtime_pct", out["allreduce_exposed_pct"]),
        ("conv_runtime_pct", out["conv_pct"]),
        ("compute_runtime_pct", compute_pct),
    ):
        out[name] = pct * steps_s / runtime_s
    out["data_runtime_pct"] = 100 * data_s / runtime_s
    out["startup_runtime_pct"] = 100 * (runtime_s - steps_s) / runtime_s
    out["window_slowdown"] = out["run_id"].map(_window_slowdown(traces, steps)).astype("float64")
    return out.reset_index(drop=True)


def _window_slowdown(traces: pd.DataFrame, steps: pd.DataFrame) -> pd.Series:
    """Per run: the window's median step_s over the measured steps' median, mean over ranks. Above 1 the
    profiler slowed the steps it recorded (a host that records every op can fall behind a fast GPU, which
    then idles: the window's idle share is inflated by about 1 - 1/slowdown)."""
    ratios: dict[str, list[float]] = {}
    by_rank = {key: frame for key, frame in steps.groupby(["run_id", "rank"], observed=True)}
    for t in traces.itertuples(index=False):
        frame = by_rank.get((t.run_id, t.rank))
        if frame is None:
            continue
        window = frame.loc[(frame["step"] >= t.first_step) & (frame["step"] <= t.last_step), "step_s"]
        base = measured(frame)["step_s"]
        if len(window) and len(base) and base.median() > 0:
            ratios.setdefault(str(t.run_id), []).append(float(window.median() / base.median()))
    return pd.Series({run: sum(values) / len(values) for run, values in ratios.items()}, dtype="float64")


def trace_breakdown_cells(per_run_trace: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """trace_breakdown_runs() per cell (mean over repeats)."""
    return per_cell_mean(per_run_trace, per_run, [*TRACE_SHARES, *TRACE_RUNTIME, *TRACE_PERTURBATION])


def timers_vs_trace(traces: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per run and rank with a trace window: the phase timers against the trace over the same steps
    (analysis/breakdown.py compare: compute <-> compute + copies, exposed comm <-> exposed comm,
    data + other <-> idle, total comm <-> total comm where timed), each as timer_pct / trace_pct, and
    disagreement_pp, the largest difference in percentage points."""
    columns = ["run_id", "rank", "disagreement_pp", "worst"]
    if traces.empty or steps.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    by_rank = {key: frame for key, frame in steps.groupby(["run_id", "rank"], observed=True)}
    for t in traces.itertuples(index=False):
        frame = by_rank.get((t.run_id, t.rank))
        if frame is None:
            continue
        window = frame[(frame["step"] >= t.first_step) & (frame["step"] <= t.last_step)]
        step_s = window["step_s"].sum()
        if window.empty or not step_s > 0:
            continue
        total = lambda name: float(window[name].fillna(0.0).sum()) if name in window else 0.0  # noqa: E731
        phases = total("fwd_s") + total("bwd_s") + total("opt_s")
        exposed = total("comm_exposed_s")
        pairs = {
            "compute": ((phases - exposed) / step_s, (t.compute_s + t.memcpy_s) / t.window_s),
            "comm_exposed": (exposed / step_s, t.comm_exposed_s / t.window_s),
            "data+other/idle": ((step_s - phases) / step_s, t.idle_s / t.window_s),
        }
        if "comm_s" in window and window["comm_s"].notna().any():
            pairs["comm_total"] = (total("comm_s") / step_s, t.comm_total_s / t.window_s)
        worst = max(pairs, key=lambda k: abs(pairs[k][0] - pairs[k][1]))
        row = {
            "run_id": str(t.run_id),
            "rank": int(t.rank),
            "worst": worst,
            "disagreement_pp": 100 * abs(pairs[worst][0] - pairs[worst][1]),
        }
        for name, (timer, trace) in pairs.items():
            row[f"{name}_timer_pct"], row[f"{name}_trace_pct"] = 100 * timer, 100 * trace
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else columns)


# the trace window's classes, bottom to top: (legend name, column of the step-time denominator, of the
# runtime one or None where that denominator has no such part)
TRACE_PARTS = [
    ("start-up", None, "startup_runtime_pct"),
    ("data", None, "data_runtime_pct"),
    ("cuDNN conv", "conv_pct", "conv_runtime_pct"),
    ("GEMM", "gemm_pct", None),
    ("other compute", "other_compute_pct", None),
    ("copies", "copies_pct", None),
    ("allreduce (exposed)", "allreduce_exposed_pct", "allreduce_exposed_runtime_pct"),
    ("other comm (exposed)", None, None),
    ("idle", "idle_pct", None),
]


@paper_style
def trace_breakdown_bars(cells: pd.DataFrame) -> Figure:
    """Two panels, one bar per cell (cell_labels: framework, loader, model, its ranks by the cells' `device`,
    what else tells the cells apart, the variant; what all share in the title; legend below, clear of it): the trace window's
    classes as shares of step time (left; they add to 100%), and the seed study's reading, shares of the
    whole runtime (right: start-up, data, cuDNN convolution, exposed allreduce; the rest is other work)."""
    rows = cells.reset_index(drop=True)
    labels = cell_labels(rows)
    height = max(1.8, 0.28 * len(rows) + 1.2)
    fig = Figure(figsize=(FULL_WIDTH_IN, height))
    left, right = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(rows))
    rest = rows["comm_exposed_pct"].fillna(0) - rows["allreduce_exposed_pct"].fillna(0)
    for ax, which in ((left, 1), (right, 2)):
        start = np.zeros(len(rows))
        for name, step_col, runtime_col in TRACE_PARTS:
            if which == 1:
                values = (
                    rest.clip(lower=0).to_numpy(float)
                    if name == "other comm (exposed)"
                    else (rows[step_col].to_numpy(float) if step_col else None)
                )
            else:
                values = rows[runtime_col].to_numpy(float) if runtime_col else None
            if values is None:
                continue
            values = np.nan_to_num(values)
            ax.barh(y, values, 0.7, left=start, color=TRACE_COLORS[name], label=name, linewidth=0)
            start += values
        if which == 2:
            ax.barh(
                y,
                np.clip(100 - start, 0, None),
                0.7,
                left=start,
                color=TRACE_COLORS["rest"],
                label="rest (other work)",
                linewidth=0,
            )
        ax.set_xlim(0, 100)
        ax.xaxis.set_major_formatter(PercentFormatter())
        ax.set_xlabel("share of step time (trace window)" if which == 1 else "share of runtime (start-up included)")
    left.set_yticks(y, labels)
    left.invert_yaxis()
    handles, names = {}, []
    for ax in (left, right):
        for handle, name in zip(*ax.get_legend_handles_labels()):
            if name not in handles:
                handles[name] = handle
                names.append(name)
    fig.subplots_adjust(bottom=0.55 / height)  # the tick labels and the x labels inside; the legend below them
    fig.legend(
        [handles[n] for n in names], names, loc="upper center", ncols=min(5, len(names)), bbox_to_anchor=(0.5, 0.0)
    )
    shared = shared_parts(cell_label_parts(rows))  # said once, in the title
    fig.suptitle(panel_title("Where the time goes, from the trace window", shared), y=1.02)
    return fig


TRACE_CONFIG = [*CELL, "variant"]
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
        key=lambda col: col.map(model_key) if col.name == "model" else col,
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
            columns_shown(traced, [*TRACE_CONFIG, *TRACE_SHARES, *TRACE_PERTURBATION]).round(3),
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
            columns_shown(traced, [*TRACE_CONFIG, *TRACE_RUNTIME]).round(1),
            key=tuple(TRACE_RUNTIME),
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
        lambda: trace_breakdown_bars(with_device(traced, analysis.counted())),  # CPU ranks are no GPUs
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
        far = disagree[disagree["disagreement_pp"] > DISAGREEMENT_PP]
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
                        f"Timers and trace agree within {DISAGREEMENT_PP:g} percentage points on every traced rank "
                        f"({len(disagree)}; largest {disagree['disagreement_pp'].max():.1f} pp)."
                    ),
                )
            )
        else:
            blocks.append(
                Block(
                    "text",
                    f"Timers and trace disagree by more than {DISAGREEMENT_PP:g} percentage points on "
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
