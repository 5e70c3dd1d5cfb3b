"""Step-time stability: slow steps and jittery runs, loader stalls (the host waiting on data) and ranks out
of step; the step timeline; the report's stability sections.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis.cells import CELL, measured, per_cell_mean, step_times
from analysis.figures import finish, panels, paper_style
from analysis.palette import IDEAL_COLOR
from analysis.report_blocks import Block, Report, add_figure, columns_shown, table_if_rows

SLOW_STEP_FACTOR = 1.2  # a step this much slower than its run's median is a slow step


def step_stability_runs(steps: pd.DataFrame, *, per_step: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run, from the slowest rank's measured step times: step_ms_median, step_ms_p95, step_ms_max,
    slow_steps_pct (steps > SLOW_STEP_FACTOR x the run's median) and slow_time_pct (the time those
    steps took beyond the median, as a share of all step time: what the run would gain if every step
    ran at the median). Steadily slow runs have a low slow_time_pct; jittery ones (loader or GPU
    contention, stragglers, a short last step per epoch) a high one. `per_step`: step_times(steps), where
    the caller has it already."""
    per_step = step_times(steps) if per_step is None else per_step
    median = per_step.groupby("run_id", observed=True)["step_s"].transform("median")
    slow = per_step["step_s"] > SLOW_STEP_FACTOR * median
    per_step = per_step.assign(slow=slow, excess_s=(per_step["step_s"] - median).where(slow, 0.0))
    runs = (
        per_step.groupby("run_id", observed=True)
        .agg(
            step_ms_median=("step_s", "median"),
            step_ms_p95=("step_s", lambda x: x.quantile(0.95)),
            step_ms_max=("step_s", "max"),
            slow_steps_pct=("slow", "mean"),
            excess_s=("excess_s", "sum"),
            time_s=("step_s", "sum"),
        )
        .reset_index()
    )
    runs["run_id"] = runs["run_id"].astype(str)
    for column in ("step_ms_median", "step_ms_p95", "step_ms_max"):
        runs[column] *= 1e3
    runs["slow_steps_pct"] *= 100
    runs["slow_time_pct"] = 100 * runs.pop("excess_s") / runs.pop("time_s")
    return runs


STABILITY = ["step_ms_median", "step_ms_p95", "step_ms_max", "slow_steps_pct", "slow_time_pct"]


def step_stability(stability_runs: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """step_stability_runs' table per cell (mean over repeats), keyed like `cells`."""
    return per_cell_mean(stability_runs, per_run, STABILITY)


def jittery_runs(
    steps: pd.DataFrame,
    stability_runs: pd.DataFrame,
    *,
    limit: int = 4,
    min_slow_time_pct: float = 1.0,
    per_step: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The measured step times (slowest rank) of the `limit` runs that lose the most time to slow steps
    (at least min_slow_time_pct; from step_stability_runs' table), with each run's median step and
    slow_time_pct: a timeline figure's data. `per_step`: step_times(steps), where the caller has it already."""
    worst = stability_runs.nlargest(limit, "slow_time_pct")
    worst = worst[worst["slow_time_pct"] >= min_slow_time_pct]
    per_step = step_times(steps) if per_step is None else per_step
    per_step = per_step[per_step["run_id"].isin(set(worst["run_id"]))]  # the few runs first: run_id as text is slow
    per_step = per_step.assign(run_id=per_step["run_id"].astype(str))
    return per_step.merge(worst[["run_id", "step_ms_median", "slow_time_pct"]], on="run_id")


LOADER_STALL_SHARE = 0.05  # a run whose host waits this share of its step time in the loader is listed
LOADER_WAIT_FACTOR = 0.1  # a step whose host waited over this share of the run's median step waited for data


def loader_stalls(steps: pd.DataFrame, *, min_share: float = LOADER_STALL_SHARE) -> pd.DataFrame:
    """Runs whose loader fell behind: host_data_share (the host blocked in the loader over step time, all
    ranks and measured steps) of at least min_share, next to data_share (the device's view, which queued
    work can hide), waiting_steps_pct (rank-steps whose host_data_s exceeds LOADER_WAIT_FACTOR x the run's
    median step_s) and max_wait_ms. Empty for logs without host_data_s."""
    columns = ["run_id", "host_data_pct", "data_pct", "waiting_steps_pct", "max_wait_ms"]
    rows = measured(steps, ["run_id", "step_s", "data_s", "host_data_s"])
    if "host_data_s" not in rows or rows["host_data_s"].isna().all():
        return pd.DataFrame(columns=columns)
    rows = rows.dropna(subset=["host_data_s"])
    median_step = rows.groupby("run_id", observed=True)["step_s"].transform("median")
    rows = rows.assign(waited=rows["host_data_s"] > LOADER_WAIT_FACTOR * median_step)
    per_run = (
        rows.groupby("run_id", observed=True)
        .agg(
            host_data_s=("host_data_s", "sum"),
            data_s=("data_s", lambda s: s.sum(min_count=1)),  # NaN: not timed
            step_s=("step_s", "sum"),
            waited=("waited", "mean"),
            max_wait_s=("host_data_s", "max"),
        )
        .reset_index()
    )
    # run_id as text once per run, not per row, in text order (the order ties keep below)
    per_run = per_run.assign(run_id=per_run["run_id"].astype(str)).sort_values("run_id", kind="stable")
    per_run = per_run.reset_index(drop=True)
    out = per_run.assign(
        host_data_pct=100 * per_run["host_data_s"] / per_run["step_s"],
        data_pct=100 * per_run["data_s"] / per_run["step_s"],
        waiting_steps_pct=100 * per_run["waited"],
        max_wait_ms=1e3 * per_run["max_wait_s"],
    )
    out = out[out["host_data_pct"] >= 100 * min_share].sort_values("host_data_pct", ascending=False)
    return out[columns].reset_index(drop=True)


RANK_PHASES = ["data_s", "fwd_s", "bwd_s", "opt_s"]


def rank_imbalance(steps: pd.DataFrame, *, min_gap_ms: float = 1.0) -> pd.DataFrame:
    """Per run with 2+ ranks and per phase: each rank's median over the measured steps, the slowest rank
    (slowest_rank, slowest_ms), the fastest rank's median (fastest_ms) and gap_ms between them; only
    gaps of at least min_gap_ms, phases in step order. Ranks of a data-parallel step wait for each
    other inside backward's all-reduce, so a rank slow in data or fwd shows there first, and the
    others then spend the gap in bwd."""
    present = [p for p in RANK_PHASES if p in steps]
    per_rank = measured(steps, ["run_id", "rank", *present])
    per_rank = per_rank.groupby(["run_id", "rank"], observed=True)[present].median().reset_index()
    long = per_rank.melt(id_vars=["run_id", "rank"], value_vars=present, var_name="phase", value_name="median_s")
    long = long.dropna(subset=["median_s"]).assign(run_id=lambda d: d["run_id"].astype(str))
    group = long.groupby(["run_id", "phase"], observed=True)["median_s"]
    long = long[group.transform("size") >= 2]
    group = long.groupby(["run_id", "phase"], observed=True)["median_s"]
    slowest = long.loc[group.idxmax()].rename(columns={"rank": "slowest_rank", "median_s": "slowest_s"})
    out = slowest.merge(group.min().rename("fastest_s").reset_index(), on=["run_id", "phase"])
    out = out.assign(
        slowest_ms=1e3 * out["slowest_s"],
        fastest_ms=1e3 * out["fastest_s"],
        gap_ms=1e3 * (out["slowest_s"] - out["fastest_s"]),
        order=out["phase"].map(RANK_PHASES.index),
        phase=out["phase"].str.removesuffix("_s"),
    )
    out = out[out["gap_ms"] >= min_gap_ms].sort_values(["run_id", "order"])
    return out[["run_id", "phase", "slowest_rank", "slowest_ms", "fastest_ms", "gap_ms"]].reset_index(drop=True)


@paper_style
def step_timeline(jittery: pd.DataFrame, *, slow_factor: float) -> Figure:
    """Step time (slowest rank) over the measured steps of the runs that lose the most time to slow
    steps (jittery_runs): one panel per run, its median dashed, slow steps marked."""
    run_ids = list(dict.fromkeys(jittery["run_id"]))
    fig, axes = panels(max(1, len(run_ids)), ncols=2, row_height_in=1.6)
    for ax, run_id in zip(axes, run_ids):
        rows = jittery[jittery["run_id"] == run_id].sort_values("step")
        step_ms, median_ms = rows["step_s"] * 1e3, float(rows["step_ms_median"].iloc[0])
        slow = step_ms > slow_factor * median_ms
        ax.plot(rows["step"], step_ms, color="#0072B2", linewidth=0.9, label="step time (slowest rank)")
        ax.axhline(median_ms, color=IDEAL_COLOR, linestyle="--", linewidth=0.8, label="median")
        ax.scatter(
            rows["step"][slow],
            step_ms[slow],
            s=9,
            color="#D55E00",
            zorder=3,
            label=f"slow (> {slow_factor:g} x median)",
        )
        ax.set_ylim(bottom=0)
        ax.set_title(f"{run_id}\n{rows['slow_time_pct'].iloc[0]:.1f}% of the time in slow steps", fontsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no 7.5
        ax.set_xlabel("step")
        ax.set_ylabel("ms")
    return finish(fig, axes, title="Step-time stability")


def draw(report: Report) -> None:
    if not report.measured:
        return
    analysis, blocks = report.analysis, report.blocks
    stability = analysis.step_stability()
    blocks.append(Block("heading", "Step-time stability (slowest rank per step)", 3))
    blocks.append(
        Block(
            "table",
            columns_shown(stability, [*CELL, "variant", *STABILITY]).round(1),
            note=(
                f"Slow steps take more than {SLOW_STEP_FACTOR:g} x their run's median; slow_time_pct is "
                "the time they took beyond the median, as a share of all step time (what the run would gain if "
                "every step ran at its median)."
            ),
            key=tuple(STABILITY),
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
            f"{LOADER_STALL_SHARE:.0%} of their step time (host_data_pct), against what the device saw "
            f"(data_pct); waiting_steps_pct counts the rank-steps that waited over "
            f"{LOADER_WAIT_FACTOR:.0%} of a median step. DALI on a GPU: check "
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
            lambda: step_timeline(jittery, slow_factor=SLOW_STEP_FACTOR),
            "Step time over the measured steps of the runs that lose the most time to slow steps.",
        )
