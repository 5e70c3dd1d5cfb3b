"""Pure metric functions: DataFrame in, DataFrame out; no I/O, no plotting.

Names and definitions are docs/architecture.md's (in full: docs/analysis.md). Pandas 3.0 and 3.1 both: no groupby.apply that returns
frames; per-group work is done with agg/transform and merges.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# A cell is one configuration: `cell_hash`, the hash of every setting of the run plus its size
# (benchmarks/rundir.py); repeats of a cell are runs with the same hash. A scaling curve is
# `group_hash` (weak: every setting but the size) or `strong_group_hash` (strong: the global batch held).
# These columns are what tables show of a cell; `variant` names any other setting that tells cells apart.
SCALING_GROUP = ["framework", "loader", "model", "precision", "per_gpu_batch"]
CELL = [*SCALING_GROUP, "world_size", "num_nodes"]
IDENTITY = ["cell_hash", "group_hash", "strong_group_hash"]
CARRIED = [*CELL, "variant", "global_batch", "campaign", "cache", *IDENTITY[1:]]
PHASES = ["data_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "comm_exposed_s", "step_s", "host_data_s"]
SHARES = ["data_share", "compute_share", "allreduce_share", "allreduce_exposed_share", "other_share", "host_data_share"]
# Stash pairing: same per-GPU batch and per-GPU samples (and the same software stack)
STASH_PAIR = ["framework", "model", "precision", "per_gpu_batch", "per_gpu_samples"]

# two-sided Student t quantiles t_{1-(1-c)/2, df} for df = 1..30; beyond that the normal quantile
_T_TABLE = {
    0.90: [
        6.314,
        2.920,
        2.353,
        2.132,
        2.015,
        1.943,
        1.895,
        1.860,
        1.833,
        1.812,
        1.796,
        1.782,
        1.771,
        1.761,
        1.753,
        1.746,
        1.740,
        1.734,
        1.729,
        1.725,
        1.721,
        1.717,
        1.714,
        1.711,
        1.708,
        1.706,
        1.703,
        1.701,
        1.699,
        1.697,
    ],
    0.95: [
        12.706,
        4.303,
        3.182,
        2.776,
        2.571,
        2.447,
        2.365,
        2.306,
        2.262,
        2.228,
        2.201,
        2.179,
        2.160,
        2.145,
        2.131,
        2.120,
        2.110,
        2.101,
        2.093,
        2.086,
        2.080,
        2.074,
        2.069,
        2.064,
        2.060,
        2.056,
        2.052,
        2.048,
        2.045,
        2.042,
    ],
    0.99: [
        63.657,
        9.925,
        5.841,
        4.604,
        4.032,
        3.707,
        3.499,
        3.355,
        3.250,
        3.169,
        3.106,
        3.055,
        3.012,
        2.977,
        2.947,
        2.921,
        2.898,
        2.878,
        2.861,
        2.845,
        2.831,
        2.819,
        2.807,
        2.797,
        2.787,
        2.779,
        2.771,
        2.763,
        2.756,
        2.750,
    ],
}
_Z = {0.90: 1.645, 0.95: 1.960, 0.99: 2.576}


def t_quantile(df: np.ndarray | int, *, confidence: float = 0.95) -> np.ndarray:
    """Two-sided Student t critical value for `df` degrees of freedom (NaN for df < 1)."""
    if confidence not in _T_TABLE:
        raise ValueError(f"confidence={confidence} is not tabulated; use one of {sorted(_T_TABLE)}")
    table = np.array([np.nan, *_T_TABLE[confidence]])
    df = np.asarray(df, dtype="int64")
    return np.where(df > 30, _Z[confidence], table[np.clip(df, 0, 30)])


def measured(steps: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The measured step records: not warm-up, not inside a profiler window (rundir.is_measured).
    `columns`: only those of them the step table has (it is wide, and copying every column of a
    campaign's rows is most of the cost for a caller that reads three)."""
    keep = ~steps["warmup"].astype(bool)
    if "profiled" in steps:
        keep &= ~steps["profiled"].fillna(False).astype(bool)
    if columns is None:
        return steps[keep]
    return steps[[c for c in columns if c in steps]][keep.to_numpy()]


def _setting_text(values: pd.Series) -> pd.Series:
    """Settings as text, as a user writes them: 2 not 2.0 (a column with gaps is float), '' for unset."""

    def text(value: object) -> str:
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    return values.map(text).astype("object")


def variants(runs: pd.DataFrame) -> pd.Series:
    """Per run, the settings that tell its cell apart from cells that look the same in a table (same
    framework, loader, model, precision and batch): 'framework.zero_stage=2, run.campaign=b', or ''.
    Settings are the config.* columns of the run key (rundir.is_identity_key)."""
    from benchmarks.rundir import is_identity_key

    columns = [c for c in runs.columns if c.startswith("config.") and is_identity_key(c[len("config.") :])]
    if runs.empty or not columns:
        return pd.Series("", index=runs.index, dtype="object")
    shown = [c for c in SCALING_GROUP if c in runs]
    text = runs[columns].apply(_setting_text)
    groups = [runs[k].astype("string") for k in shown]

    def differ(keys: list[pd.Series]) -> set[str]:
        """The columns that take two values or more within one group of `keys` (one groupby for them all)."""
        counts = text.groupby(keys, dropna=False).nunique()
        return set(counts.columns[(counts > 1).any()])

    differing = differ(groups) if shown else set(columns)
    varying = [c for c in columns if c in differing]
    # a profile's name stands for the settings it brings (system.name=h200, not its 15 keys), unless
    # a setting was changed under the same name
    named = {c[: -len(".name")] for c in varying if c.count(".") == 2 and c.endswith(".name")}  # config.<group>.name
    within_name = {g: differ([*groups, text[f"{g}.name"]]) for g in named}

    def group(column: str) -> str:
        return ".".join(column.split(".")[:2])

    varying = [c for c in varying if group(c) not in named or c == f"{group(c)}.name" or c in within_name[group(c)]]
    if not varying:
        return pd.Series("", index=runs.index, dtype="object")
    parts = [(c[len("config.") :], text[c].to_numpy()) for c in varying]
    return pd.Series(
        [", ".join(f"{k}={v[i]}" for k, v in parts if v[i] not in ("", "None")) for i in range(len(runs))],
        index=runs.index,
        dtype="object",
    )


def step_times(steps: pd.DataFrame) -> pd.DataFrame:
    """Per run per measured step: the slowest rank's step_s (it defines the step), global samples, ranks."""
    grouped = measured(steps, ["run_id", "step", "step_s", "samples", "rank"]).groupby(
        ["run_id", "step"], observed=True, sort=True
    )
    return grouped.agg(step_s=("step_s", "max"), samples=("samples", "sum"), num_ranks=("rank", "size")).reset_index()


def run_throughput(
    steps: pd.DataFrame, runs: pd.DataFrame | None = None, *, per_step: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per run, recomputed from the measured steps: throughput_img_s = global samples / sum over steps of
    the slowest rank's step_s; per_gpu_img_s = throughput_img_s / world_size.

    With `runs`, the result carries the runs' cell columns, and the summary's own figure (over wall
    time, which also holds the gaps between steps) as summary_throughput_img_s. `per_step`: step_times(steps),
    where the caller has it already.
    """
    per_step = step_times(steps) if per_step is None else per_step
    per_run = (
        per_step.groupby("run_id", observed=True)
        .agg(
            measured_steps=("step", "size"),
            measured_samples=("samples", "sum"),
            time_s=("step_s", "sum"),
            step_s_median=("step_s", "median"),
            num_ranks=("num_ranks", "max"),
        )
        .reset_index()
    )
    per_run["run_id"] = per_run["run_id"].astype(str)
    per_run["throughput_img_s"] = per_run["measured_samples"] / per_run["time_s"]
    if runs is None:
        per_run["per_gpu_img_s"] = per_run["throughput_img_s"] / per_run["num_ranks"]
        return per_run
    keep = [c for c in [*CELL, "global_batch", "repeat", "campaign", "cache", "run_dir", *IDENTITY] if c in runs]
    info = runs[["run_id", *keep]].copy()
    info["variant"] = variants(runs)
    if "throughput_img_s" in runs:
        info["summary_throughput_img_s"] = runs["throughput_img_s"]
    info["run_id"] = info["run_id"].astype(str)
    merged = per_run.merge(info, on="run_id", how="left")
    world = merged["world_size"].fillna(merged["num_ranks"]) if "world_size" in merged else merged["num_ranks"]
    merged["per_gpu_img_s"] = merged["throughput_img_s"] / world.astype("float64")
    merged["per_gpu_samples"] = merged["measured_samples"] / world.astype("float64")
    return merged


def _by_cell(frame: pd.DataFrame) -> list[str]:
    """The grouping of per-run rows into cells: the run key's hash, else (old tables) the shown columns."""
    return ["cell_hash"] if "cell_hash" in frame else [c for c in CELL if c in frame]


def _carried(frame: pd.DataFrame, by: list[str], *, extra: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per cell of the columns that describe it (equal over a cell's runs): CARRIED, and `extra`
    where the frame has them."""
    keep = [c for c in [*CARRIED, *extra] if c in frame and c not in by]
    return (
        frame.groupby(by, dropna=False, observed=True)[keep].first().reset_index()
        if keep
        else frame[by].drop_duplicates()
    )


def repeat_stats(
    per_run: pd.DataFrame, *, value: str = "throughput_img_s", by: list[str] | None = None, confidence: float = 0.95
) -> pd.DataFrame:
    """Per cell: median, mean and a Student-t confidence interval of the mean of `value` over repeats
    (ci_low/ci_high; NaN with a single repeat: one run says nothing about its noise)."""
    by = by or _by_cell(per_run)
    stats = per_run.groupby(by, dropna=False, observed=True)[value].agg(["median", "mean", "std", "size"]).reset_index()
    half = t_quantile(stats["size"].to_numpy() - 1, confidence=confidence) * stats["std"] / np.sqrt(stats["size"])
    stats["ci_low"], stats["ci_high"] = stats["mean"] - half, stats["mean"] + half
    return stats.rename(
        columns={
            "median": f"{value}_median",
            "mean": f"{value}_mean",
            "std": f"{value}_std",
            "size": "num_repeats",
            "ci_low": f"{value}_ci_low",
            "ci_high": f"{value}_ci_high",
        }
    )


def cells(per_run: pd.DataFrame, *, confidence: float = 0.95) -> pd.DataFrame:
    """Repeats -> one row per cell (one configuration, `cell_hash`): medians of throughput_img_s and
    per_gpu_img_s (the figures plotted), the t-interval of the throughput's mean, num_repeats, and the
    columns that describe the cell (CARRIED)."""
    by = _by_cell(per_run)
    stats = repeat_stats(per_run, value="throughput_img_s", by=by, confidence=confidence)
    per_gpu = per_run.groupby(by, dropna=False, observed=True)["per_gpu_img_s"].median().reset_index()
    out = _carried(per_run, by).merge(stats, on=by).merge(per_gpu, on=by)
    out["throughput_img_s"] = out.pop("throughput_img_s_median")
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


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


def breakdown(steps: pd.DataFrame) -> pd.DataFrame:
    """Per run, time shares of the measured steps summed over ranks and steps:
    data_share, compute_share (fwd+bwd+opt minus exposed allreduce where that is measured),
    allreduce_share (total, overlapped or not), allreduce_exposed_share, other_share (step minus
    data, compute and exposed allreduce). data + compute + exposed + other = 1; allreduce_share is
    NaN where the framework did not time its collectives (then it sits inside compute).
    host_data_share: the host blocked in the loader (host_data_s) over step time, outside that sum: on a
    GPU, queued work can hide a late batch from data_share but not from this (NaN in older logs)."""
    rows = measured(steps, ["run_id", *PHASES])
    present = [c for c in PHASES if c in rows]
    sums = rows.groupby("run_id", observed=True)[present].sum(min_count=1)
    for column in PHASES:
        if column not in sums:
            sums[column] = np.nan
    exposed = sums["comm_exposed_s"].fillna(0.0)
    compute = sums[["fwd_s", "bwd_s", "opt_s"]].sum(axis=1, min_count=1) - exposed
    data = sums["data_s"].fillna(0.0)
    step = sums["step_s"]
    out = pd.DataFrame(
        {
            "run_id": sums.index.astype(str),
            "data_share": (data / step).to_numpy(),
            "compute_share": (compute / step).to_numpy(),
            "allreduce_share": (sums["comm_s"] / step).to_numpy(),
            "allreduce_exposed_share": (sums["comm_exposed_s"] / step).to_numpy(),
            "other_share": ((step - data - compute - exposed) / step).to_numpy(),
            "host_data_share": (sums["host_data_s"] / step).to_numpy(),
            "comm_measured": sums["comm_s"].notna().to_numpy(),
        }
    )
    return out.reset_index(drop=True)


def breakdown_cells(shares: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Per-run shares -> one row per cell (mean over repeats), keyed like `cells`."""
    return _per_cell_mean(shares, per_run, SHARES)


def _per_cell_mean(per_run_values: pd.DataFrame, per_run: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    by = _by_cell(per_run)
    merged = per_run_values.merge(per_run[["run_id", *by]], on="run_id")
    means = merged.groupby(by, dropna=False, observed=True)[columns].mean().reset_index()
    out = _carried(per_run, by).merge(means, on=by)
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


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
    return _per_cell_mean(per_run_trace, per_run, [*TRACE_SHARES, *TRACE_RUNTIME, *TRACE_PERTURBATION])


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
    return _per_cell_mean(stability_runs, per_run, STABILITY)


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


def stash_stalls(per_run: pd.DataFrame) -> pd.DataFrame:
    """Stash stalls from paired runs (same framework, model, precision, per-GPU batch, per-GPU samples);
    T = time_s of a run (median over repeats). One row per stall:
      interconnect = T(synthetic, N GPUs, 1 node) - T(synthetic, 1 GPU)
      network      = T(synthetic, N GPUs over k nodes) - T(synthetic, N GPUs, 1 node)
      cpu          = T(real loader, warm cache) - T(synthetic)        (same N and nodes)
      disk         = T(real loader, cold cache) - T(real loader, warm) (same loader, N, nodes)
    stall_pct = stall_s / baseline_time_s x 100 (the stall against the run it is measured from: the Stash
    study's interconnect and network stalls, "as high as 500%"); stall_pct_of_training = stall_s / time_s x
    100 (against the stalled run's own training time: how the study gives CPU and disk stalls, "as a
    percentage of the total training time"). The cache state is the `cache` column (default warm).
    Runs pair within one campaign only (a Stash study is one campaign: its runs differ by design in the
    loader, size, cache and virtual epoch, so they are not one cell; two studies under one root never mix),
    and within one system profile where per_run has a `system` column (per-instance stalls).
    """
    same = [*STASH_PAIR, *(c for c in ("campaign", "system") if c in per_run)]
    columns = [
        "stall",
        *same,
        "loader",
        "world_size",
        "num_nodes",
        "time_s",
        "baseline_time_s",
        "stall_s",
        "stall_pct",
        "stall_pct_of_training",
    ]
    table = per_run.copy()
    table["cache"] = table["cache"].fillna("warm") if "cache" in table else "warm"
    # per-GPU samples can differ in the last digits when logged from floats
    table["per_gpu_samples"] = table["per_gpu_samples"].round(6)
    key = [*same, "loader", "cache", "world_size", "num_nodes"]
    t = table.groupby(key, dropna=False, observed=True)["time_s"].median().reset_index()
    syn = t[t["loader"] == "synthetic"]
    real = t[t["loader"] != "synthetic"]
    warm, cold = real[real["cache"] == "warm"], real[real["cache"] == "cold"]

    def pair(name: str, test: pd.DataFrame, base: pd.DataFrame, on: list[str]) -> pd.DataFrame:
        base = base[[*on, "time_s"]].rename(columns={"time_s": "baseline_time_s"})
        joined = test.merge(base, on=on)
        joined["stall"] = name
        return joined

    one_gpu = syn[syn["world_size"] == 1]
    single_node = syn[(syn["num_nodes"] == 1) & (syn["world_size"] > 1)]
    parts = [
        pair("interconnect", single_node, one_gpu, same),
        pair("network", syn[syn["num_nodes"] > 1], syn[syn["num_nodes"] == 1], [*same, "world_size"]),
        pair("cpu", warm, syn, [*same, "world_size", "num_nodes"]),
        pair("disk", cold, warm, [*same, "loader", "world_size", "num_nodes"]),
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=columns)
    out = pd.concat(parts, ignore_index=True)
    out["stall_s"] = out["time_s"] - out["baseline_time_s"]
    out["stall_pct"] = 100.0 * out["stall_s"] / out["baseline_time_s"]
    out["stall_pct_of_training"] = 100.0 * out["stall_s"] / out["time_s"]
    order = {"interconnect": 0, "network": 1, "cpu": 2, "disk": 3}
    out = out.sort_values(
        ["stall", "model", "world_size", "num_nodes"], key=lambda s: s.map(order) if s.name == "stall" else s
    )
    return out[columns].reset_index(drop=True)


def match_keys(a_runs: pd.DataFrame, b_runs: pd.DataFrame) -> tuple[pd.Series, pd.Series, list[str]]:
    """Per run of two campaigns, the key that pairs a cell of A with the same cell of B: every setting
    of the run key that both campaigns record (config.* columns, so that a setting added by a newer
    ddlbench does not part every cell) except run.campaign, plus world_size and num_nodes.
    Returns (A keys, B keys, the settings used)."""
    from benchmarks.rundir import is_identity_key

    def settings(runs: pd.DataFrame) -> set[str]:
        return {c for c in runs.columns if c.startswith("config.") and is_identity_key(c[len("config.") :])}

    common = sorted((settings(a_runs) & settings(b_runs)) - {"config.run.campaign"}) + ["world_size", "num_nodes"]

    def keys(runs: pd.DataFrame) -> pd.Series:
        # each value as its setting reads, whatever the column's dtype: a column that also holds runs without
        # the setting (NaN) is float in one campaign and int in another, and 8.0 must pair with 8
        present = runs.reindex(columns=common).apply(_setting_text)
        return (
            pd.util.hash_pandas_object(present, index=False)
            .astype("string")
            .where(runs.reindex(columns=["world_size"])["world_size"].notna())
        )

    return keys(a_runs), keys(b_runs), common


COMPARE_FLAGS = ("regression", "improvement", "ok", "missing in B", "incomplete in B", "only in B")


def compare(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    value: str = "throughput_img_s",
    threshold: float = 0.05,
    higher_is_better: bool = True,
    incomplete_in_b: frozenset | set = frozenset(),
) -> pd.DataFrame:
    """Per-cell deltas of two campaigns' cell tables (B relative to A), paired on `match_key`.

    A difference counts when it exceeds `threshold` (a fraction) AND, where both cells have repeats,
    the two 95% confidence intervals of the mean do not overlap (judged_by says which rule applied):
    'regression' (B worse), 'improvement', 'ok'; a cell of A that B lacks is 'missing in B', or
    'incomplete in B' when B has runs of it but none counted (keys in `incomplete_in_b`); 'only in B'."""
    if not 0 <= threshold < 1 or math.isnan(threshold):
        raise ValueError(f"threshold={threshold}: use a fraction in [0, 1), e.g. 0.05 for 5%")
    shown = [c for c in [*CELL, "variant"] if c in a or c in b]
    stats = [value, f"{value}_ci_low", f"{value}_ci_high", "num_repeats"]

    def side(cells: pd.DataFrame, tag: str) -> pd.DataFrame:
        cells = cells.reindex(columns=["match_key", *shown, *stats])
        return cells.rename(columns={c: f"{c}_{tag}" for c in stats})

    out = side(a, "a").merge(side(b, "b"), on="match_key", how="outer", indicator=True, suffixes=("", "_from_b"))
    for column in shown:  # a cell only in B describes itself
        out[column] = out[column].where(out["_merge"] != "right_only", out[f"{column}_from_b"])
    out = out.drop(columns=[f"{c}_from_b" for c in shown])
    out["delta"] = out[f"{value}_b"] - out[f"{value}_a"]
    out["rel_delta"] = out["delta"] / out[f"{value}_a"]
    signed = out["rel_delta"] if higher_is_better else -out["rel_delta"]
    with_ci = (
        out[[f"{value}_ci_low_a", f"{value}_ci_high_a", f"{value}_ci_low_b", f"{value}_ci_high_b"]].notna().all(axis=1)
    )
    apart = (
        ~with_ci
        | (out[f"{value}_ci_high_b"] < out[f"{value}_ci_low_a"])
        | (out[f"{value}_ci_low_b"] > out[f"{value}_ci_high_a"])
    )
    a_only = out["_merge"] == "left_only"
    out["flag"] = np.select(
        [
            a_only & out["match_key"].isin(incomplete_in_b),
            a_only,
            out["_merge"] == "right_only",
            (signed < -threshold) & apart,
            (signed > threshold) & apart,
        ],
        ["incomplete in B", "missing in B", "only in B", "regression", "improvement"],
        default="ok",
    )
    out["judged_by"] = np.where(
        out["_merge"] != "both",
        "",
        np.where(
            with_ci, f"threshold {threshold:.0%} + 95% CIs", f"threshold {threshold:.0%} (a single repeat: no CI)"
        ),
    )
    order = [c for c in shown if c in out]
    return out.drop(columns="_merge").sort_values(order).reset_index(drop=True)


MEMORY = ("peak_allocated_gib", "peak_reserved_gib")


def peak_memory(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell (cell_hash): the largest peak allocated and reserved GPU memory over its runs and their
    ranks, in GiB (summary.json's peak_allocated_bytes / peak_reserved_bytes, each already the largest
    over a run's ranks); NaN where no run measured one (CPU runs)."""
    out = pd.DataFrame({"cell_hash": runs["cell_hash"]}) if "cell_hash" in runs else pd.DataFrame(columns=["cell_hash"])
    for gib, source in zip(MEMORY, ("peak_allocated_bytes", "peak_reserved_bytes")):
        values = runs[source] if source in runs else pd.Series(pd.NA, index=runs.index)
        out[gib] = pd.to_numeric(values, errors="coerce").astype("float64") / 2**30
    return out.groupby("cell_hash", dropna=False)[list(MEMORY)].max().reset_index()


# what a loader's CPU work and queue depth are set to (config.yaml), shown next to its figures
LOADER_SETTINGS = [
    "num_workers",
    "num_threads",
    "prefetch_factor",
    "prefetch_queue_depth",
    "prefetch_batches",
    "cpu_decode_share",
    "pin_memory",
    "reader",
    "decoder_device",
    "hw_decoder_load",
    "augment",
]


def loader_settings(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct loader configuration over the runs: the loader, the rank's CPUs
    (system.cpus_per_rank), the settings of LOADER_SETTINGS it has, and how many runs used it."""
    columns = {f"config.loader.{name}": name for name in LOADER_SETTINGS if f"config.loader.{name}" in runs}
    if "loader" not in runs or runs.empty:
        return pd.DataFrame(columns=["loader", "cpus_per_rank", "runs"])
    frame = runs[
        ["loader", *(["config.system.cpus_per_rank"] if "config.system.cpus_per_rank" in runs else []), *columns]
    ].rename(columns={**columns, "config.system.cpus_per_rank": "cpus_per_rank"})
    whole = lambda v: int(v) if isinstance(v, float) and v.is_integer() else v  # noqa: E731 (a NaN column holds floats)
    frame = frame.dropna(subset=["loader"]).astype(object).where(frame.notna(), "-").map(whole)
    keys = list(frame.columns)
    table = frame.groupby(keys, dropna=False, sort=True).size().reset_index(name="runs")
    # a setting no loader of these runs has is no column
    return table.loc[:, [c for c in table.columns if not (table[c].astype(str) == "-").all()]]


# --- utilisation (telemetry) and the GPU interconnect (commbench) ---------------------------------

# column -> (telemetry field, statistic, scale): benchmarks/telemetry.py's fields, in the units the name says.
# GPU fields over every sample of every GPU; host fields (HOST_FIELDS) over one rank per host
UTILISATION = {
    "gpu_util_pct_mean": ("gpu_util_percent", "mean", 1.0),
    "gpu_util_pct_p95": ("gpu_util_percent", "p95", 1.0),
    "gpu_mem_used_gb_peak": ("gpu_mem_used_bytes", "max", 1e-9),
    "pcie_rx_gb_s_mean": ("pcie_rx_bytes_s", "mean", 1e-9),
    "pcie_tx_gb_s_mean": ("pcie_tx_bytes_s", "mean", 1e-9),
    "nvlink_rx_gb_s_mean": ("nvlink_rx_bytes_s", "mean", 1e-9),
    "nvlink_tx_gb_s_mean": ("nvlink_tx_bytes_s", "mean", 1e-9),
    "cpu_pct_mean": ("cpu_percent", "mean", 1.0),
    "host_mem_used_gb_peak": ("host_mem_used_bytes", "max", 1e-9),
}
# host-wide fields repeat on every rank of a host (benchmarks/telemetry.py): one rank's samples per host count
HOST_FIELDS = ("cpu_percent", "host_mem_used_bytes")
_STATISTIC = {"mean": "mean", "max": "max", "p95": lambda values: values.quantile(0.95)}


def utilisation_runs(telemetry: pd.DataFrame) -> pd.DataFrame:
    """Per run with telemetry: UTILISATION's columns over all its samples (the whole run, sampler start to
    stop: the rank logs carry no wall-clock times to match the measured window to), and num_samples. GPU
    fields pool every GPU's samples (all sample at one rate); CPU % and host memory use the lowest rank of
    each host (`host`; every rank where samples have none). NaN where no sample has the field (no NVML, no
    NVLink counters)."""
    columns = ["run_id", "num_samples", *UTILISATION]
    if telemetry.empty or "run_id" not in telemetry:
        return pd.DataFrame(columns=columns)
    frame = telemetry.assign(run_id=telemetry["run_id"].astype(str))
    out = frame.groupby("run_id").size().rename("num_samples").to_frame()
    host_rows = frame
    if "host" in frame and "rank" in frame:
        rank = pd.to_numeric(frame["rank"], errors="coerce")
        first = rank.groupby([frame["run_id"], frame["host"].astype(str)]).transform("min")
        host_rows = frame[(rank == first) | rank.isna()]  # a sample without a rank cannot be told apart
    for column, (field, statistic, scale) in UTILISATION.items():
        rows = host_rows if field in HOST_FIELDS else frame
        if field not in rows:
            out[column] = np.nan
            continue
        values = pd.to_numeric(rows[field], errors="coerce").astype("float64")
        out[column] = values.groupby(rows["run_id"]).agg(_STATISTIC[statistic]).reindex(out.index) * scale
    return out.reset_index()[columns]


def utilisation_cells(per_run_utilisation: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """utilisation_runs() per cell (mean over the repeats with telemetry; counted runs only), keyed like `cells`,
    with num_repeats: how many of them had telemetry."""
    frame = per_run_utilisation[per_run_utilisation["run_id"].isin(set(per_run["run_id"].astype(str)))]
    if frame.empty:
        return pd.DataFrame(columns=[*CELL, "variant", "num_repeats", *UTILISATION])
    frame = frame.assign(num_repeats=1.0)
    runs = per_run.assign(run_id=per_run["run_id"].astype(str))
    by = _by_cell(runs)
    merged = frame.merge(runs[["run_id", *by]], on="run_id")
    counts = merged.groupby(by, dropna=False, observed=True)["num_repeats"].sum().astype("int64").reset_index()
    out = _per_cell_mean(frame, runs, list(UTILISATION)).merge(counts, on=by)
    return out[[c for c in out if c not in UTILISATION] + list(UTILISATION)]


# --- data-parallel modes and precisions (seed study C's software comparison) -----------------------

DEFAULT_SAMPLE_UNIT = "images"  # what a run counted before summary.json said (sample_unit)
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


def sample_units(runs: pd.DataFrame) -> pd.Series:
    """Per run (index: run_id as text) what one sample is: summary.json's sample_unit (images or sequences),
    DEFAULT_SAMPLE_UNIT where the summary predates it."""
    units = runs["sample_unit"] if "sample_unit" in runs else pd.Series(None, index=runs.index, dtype="object")
    units = units.astype("object").where(units.notna(), DEFAULT_SAMPLE_UNIT).astype(str)
    return pd.Series(units.to_numpy(), index=runs["run_id"].astype(str).to_numpy(), dtype="object")


def with_sample_unit(cell_table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """cell_table (keyed by cell_hash) with each cell's sample_unit (sample_units of its runs)."""
    if "cell_hash" not in cell_table or "cell_hash" not in runs:
        return cell_table.assign(sample_unit=DEFAULT_SAMPLE_UNIT)
    units = pd.Series(sample_units(runs).to_numpy(), index=runs["cell_hash"].to_numpy())
    units = units[~units.index.duplicated()]
    return cell_table.assign(
        sample_unit=cell_table["cell_hash"].map(units).astype("object").fillna(DEFAULT_SAMPLE_UNIT)
    )


def rate_label(unit: str) -> str:
    """How a throughput in a sample unit reads: img/s (images), seq/s (sequences: benchmarks/models/configs.py
    RATE_LABELS); any other unit by its own name (<unit>/s)."""
    from benchmarks.models.configs import RATE_LABELS

    return RATE_LABELS.get(str(unit), f"{unit}/s")


def rate_suffix(unit: str) -> str:
    """A throughput column's unit suffix for a sample unit: _img_s (images), _seq_s (sequences)."""
    return "_" + rate_label(unit).replace("/", "_")


def mode_groups(runs: pd.DataFrame) -> pd.Series:
    """Per run (index: run_id as text), the hash of its run key without the mode's settings (MODE_PREFIXES:
    framework.*, precision.*): runs that share it differ in data-parallel mode and precision only."""
    from benchmarks.rundir import is_identity_key

    columns = [
        c
        for c in runs.columns
        if c.startswith("config.") and is_identity_key(c[len("config.") :]) and not c.startswith(MODE_PREFIXES)
    ]
    text = runs[columns].apply(_setting_text) if columns else pd.DataFrame(index=runs.index)
    for size in ("world_size", "num_nodes"):
        if size in runs:
            text[size] = _setting_text(runs[size])
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
    out["device"] = _setting_text(device).to_numpy()
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


# --- hosts: per-host step and collective times, and slow hosts of multi-node runs ------------------

STRAGGLER_PCT = 5.0  # a host whose compute is this much slower than the run's median host is slow ...
STRAGGLER_MIN_MS = 1.0  # ... by at least this much per step (the timers' resolution on small CPU steps)
HOSTS = [
    "run_id",
    "host",
    "num_ranks",
    "ranks",
    "step_ms_mean",
    "step_ms_p95",
    "compute_ms_mean",
    "fwd_ms_mean",
    "comm_ms_mean",
    "comm_exposed_ms_mean",
    "data_ms_mean",
    "compute_slowdown_pct",
    "straggler",
]


def _rank_ranges(ranks: list[int]) -> str:
    """0, 1, 2, 3, 8 -> '0-3, 8'."""
    ranges: list[list[int]] = []
    for rank in sorted(ranks):
        if ranges and rank == ranges[-1][1] + 1:
            ranges[-1][1] = rank
        else:
            ranges.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def host_times(
    steps: pd.DataFrame,
    ranks: pd.DataFrame,
    *,
    threshold_pct: float = STRAGGLER_PCT,
    min_gap_ms: float = STRAGGLER_MIN_MS,
) -> pd.DataFrame:
    """Per run whose ranks ran on 2+ hosts (`ranks`: the rank logs' header hosts) and per host, over its
    ranks' measured steps: num_ranks, ranks ('0-3'), step_ms_mean / _p95, compute_ms_mean (fwd + bwd + opt
    minus the exposed collective time where it is measured, as breakdown's compute), fwd_ms_mean, comm_ms_mean and
    comm_exposed_ms_mean (NaN where collectives are not timed), data_ms_mean, compute_slowdown_pct (against
    the run's median host) and `straggler`: compute slower than the median host's by more than
    threshold_pct and min_gap_ms. Compute, not step time: in synchronous training every rank's step takes
    as long as the slowest one's, the others wait in the collectives."""
    if steps.empty or ranks.empty or not ranks["host"].notna().any():
        return pd.DataFrame(columns=HOSTS)
    where = ranks.dropna(subset=["host"]).assign(run_id=lambda d: d["run_id"].astype(str))
    where = where[where.groupby("run_id")["host"].transform("nunique") > 1][["run_id", "rank", "host"]]
    if where.empty:
        return pd.DataFrame(columns=HOSTS)
    timed = ["step_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "comm_exposed_s", "data_s"]
    rows = measured(steps, ["run_id", "rank", *timed])
    rows = rows[rows["run_id"].isin(set(where["run_id"]))]
    # the step rows keep their categorical run_id (as text per row it costs more than the rest); the
    # per-host table takes text and text order at the end
    if isinstance(rows["run_id"].dtype, pd.CategoricalDtype):
        where = where.assign(run_id=where["run_id"].astype(rows["run_id"].dtype))
    else:
        rows = rows.assign(run_id=rows["run_id"].astype(str))
    rows = rows.merge(where, on=["run_id", "rank"])
    exposed = rows["comm_exposed_s"].fillna(0.0) if "comm_exposed_s" in rows else 0.0
    phases = rows[["fwd_s", "bwd_s", "opt_s"]].sum(axis=1, min_count=1)
    rows = rows.assign(compute_s=phases - exposed)
    grouped = rows.groupby(["run_id", "host"], sort=True, observed=True)
    out = grouped.agg(
        num_ranks=("rank", "nunique"),
        step_ms_mean=("step_s", "mean"),
        step_ms_p95=("step_s", lambda x: x.quantile(0.95)),
        compute_ms_mean=("compute_s", "mean"),
        fwd_ms_mean=("fwd_s", "mean"),
        comm_ms_mean=("comm_s", "mean"),
        comm_exposed_ms_mean=("comm_exposed_s", "mean"),
        data_ms_mean=("data_s", "mean"),
    )
    for column in HOSTS[4:11]:  # step_ms_mean .. data_ms_mean: seconds to ms
        out[column] *= 1e3
    out["ranks"] = grouped["rank"].agg(lambda r: _rank_ranges(r.unique().tolist()))
    out = out.reset_index()
    out = out.assign(run_id=out["run_id"].astype(str)).sort_values(["run_id", "host"], kind="stable")
    median = out.groupby("run_id")["compute_ms_mean"].transform("median")
    out["compute_slowdown_pct"] = 100 * (out["compute_ms_mean"] / median - 1)
    out["straggler"] = (out["compute_slowdown_pct"] > threshold_pct) & (out["compute_ms_mean"] - median > min_gap_ms)
    return out[HOSTS].reset_index(drop=True)


def slow_hosts(hosts: pd.DataFrame) -> pd.DataFrame:
    """host_times' stragglers, slowest first: run_id, host, ranks, compute_ms_mean, compute_slowdown_pct."""
    slow = hosts[hosts["straggler"].astype(bool)] if not hosts.empty else hosts
    return slow.sort_values("compute_slowdown_pct", ascending=False)[
        ["run_id", "host", "ranks", "compute_ms_mean", "compute_slowdown_pct"]
    ].reset_index(drop=True)


P2P_OP, P2P_LATENCY_OP, H2D_OP = "p2p_copy", "p2p_latency", "h2d_copy"  # benchmarks/commbench/gpu.py's records
GPU_TEST_OPS = (P2P_OP, P2P_LATENCY_OP, H2D_OP)
P2P_COLUMNS = ["source", "host", "src_gpu", "dst_gpu", "peer_access", "p2p_gb_s", "p2p_latency_us"]
H2D_COLUMNS = ["source", "host", "rank", "gpu", "concurrent_gpus", "size_bytes", "h2d_gb_s"]


def _with(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """frame with every one of `columns` (null where the records lack the field)."""
    return frame.assign(**{c: pd.NA for c in columns if c not in frame})


def _index(values: pd.Series) -> pd.Series:
    """A GPU index or count as Int64: null where a record's value is no whole number >= 0."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    return numbers.where((numbers >= 0) & (numbers == numbers.round()) & (numbers < 2**31)).astype("Int64")


def p2p_matrix(commbench: pd.DataFrame) -> pd.DataFrame:
    """The P2P copy matrix per commbench file (`source`) and host: per ordered GPU pair (src_gpu -> dst_gpu)
    the copy bandwidth p2p_gb_s (algbw of the large copy, GB = 1e9 B) and p2p_latency_us (the 4-byte copy's
    time), median over repeated records, and whether peer access was on."""
    if commbench.empty or "op" not in commbench or not (commbench["op"] == P2P_OP).any():
        return pd.DataFrame(columns=P2P_COLUMNS)
    frame = _with(commbench, ["host", "src_gpu", "dst_gpu", "peer_access", "source", "algbw_gb_s", "time_s"])
    frame = frame.assign(host=frame["host"].astype("string").fillna(""), source=frame["source"].astype("string"))
    frame = frame.assign(src_gpu=_index(frame["src_gpu"]), dst_gpu=_index(frame["dst_gpu"]))
    frame = frame.dropna(subset=["src_gpu", "dst_gpu"])
    key = ["source", "host", "src_gpu", "dst_gpu"]
    copies = frame[frame["op"] == P2P_OP]
    out = copies.groupby(key, sort=True).agg(peer_access=("peer_access", "first"), p2p_gb_s=("algbw_gb_s", "median"))
    latency = frame[frame["op"] == P2P_LATENCY_OP].groupby(key)["time_s"].median() * 1e6
    out["p2p_latency_us"] = latency.reindex(out.index)
    return out.reset_index()[P2P_COLUMNS]


def h2d_bandwidth(commbench: pd.DataFrame) -> pd.DataFrame:
    """Host-to-device copy bandwidth per GPU while every rank copies at once, per commbench file: one row per
    record (`rank`: its place in the file, which lists the ranks in order), its GPU, how many GPUs copied
    at the same time and h2d_gb_s (GB = 1e9 B)."""
    if commbench.empty or "op" not in commbench or not (commbench["op"] == H2D_OP).any():
        return pd.DataFrame(columns=H2D_COLUMNS)
    frame = _with(
        commbench[commbench["op"] == H2D_OP],
        ["host", "gpu", "concurrent_gpus", "source", "size_bytes", "world_size", "algbw_gb_s"],
    )
    frame = frame.assign(
        host=frame["host"].astype("string").fillna(""),
        source=frame["source"].astype("string"),
        rank=frame.groupby("source", sort=False).cumcount(),
        gpu=_index(frame["gpu"]),
        concurrent_gpus=_index(frame["concurrent_gpus"]).fillna(_index(frame["world_size"])),
        h2d_gb_s=frame["algbw_gb_s"],
    )
    return frame.sort_values(["source", "rank"]).reset_index(drop=True)[H2D_COLUMNS]


# --- validation accuracy, time to accuracy and the learning-rate study ----------------------------

# the setting a learning-rate study varies besides the global batch (docs/optim.md)
SCHEDULE_SETTING = "config.optim.schedule.name"
STUDY = ["schedule", "global_batch"]
ACCURACY = ["top1_pct", "top5_pct", "val_loss", "epochs", "evaluations", "eval_s"]


def study_runs(per_run: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """per_run (run_throughput) with what a learning-rate study varies: `schedule` (optim.schedule.name;
    '' where config.yaml has none) and `global_batch` (per_gpu_batch x world_size where the summary
    lacks it)."""
    out = per_run.copy()
    names = (
        runs.set_index(runs["run_id"].astype(str))[SCHEDULE_SETTING]
        if SCHEDULE_SETTING in runs
        else pd.Series(dtype="object")
    )
    out["schedule"] = _setting_text(out["run_id"].astype(str).map(names))
    batch = pd.to_numeric(out["per_gpu_batch"], errors="coerce") * pd.to_numeric(out["world_size"], errors="coerce")
    given = pd.to_numeric(out["global_batch"], errors="coerce") if "global_batch" in out else batch
    out["global_batch"] = given.fillna(batch).astype("Int64")
    return out


def accuracy_runs(evals: pd.DataFrame) -> pd.DataFrame:
    """Per run with evaluations (eval.jsonl): the last evaluation's top-1 / top-5 (%), loss and epochs
    done (NaN where the file predates the field), how many evaluations it made and their seconds in all
    (not in any training step)."""
    if evals.empty:
        return pd.DataFrame(columns=["run_id", *ACCURACY])
    ordered = evals.sort_values(["run_id", "step"])
    last = ordered.groupby("run_id", observed=True).last()
    out = pd.DataFrame(
        {
            "run_id": last.index.astype(str),
            "top1_pct": 100 * last["top1"].to_numpy(),
            "top5_pct": 100 * last["top5"].to_numpy(),
            "val_loss": last["loss"].to_numpy(),
            "epochs": last.reindex(columns=["epochs"])["epochs"].astype("float64").to_numpy(),
        }
    )
    counts = ordered.groupby("run_id", observed=True).agg(evaluations=("step", "size"), eval_s=("eval_s", "sum"))
    counts.index = counts.index.astype(str)
    return out.merge(counts, left_on="run_id", right_index=True).reset_index(drop=True)


def accuracy_cells(per_run_accuracy: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """accuracy_runs() per cell (mean over repeats), with num_repeats (its runs with evaluations) and,
    where per_run has them (study_runs), the schedule and the global batch."""
    by = _by_cell(per_run)
    merged = per_run_accuracy.merge(per_run[["run_id", *by]], on="run_id")
    stats = merged.groupby(by, dropna=False, observed=True).agg(
        num_repeats=("run_id", "size"), **{c: (c, "mean") for c in ACCURACY}
    )
    out = _carried(per_run, by, extra=("schedule",)).merge(stats.reset_index(), on=by)
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


# what a run's classes are read from: the data set's count (meta.json, since model.num_classes=auto), else the head's
CLASSES_SETTINGS = ("meta.num_classes.data", "config.model.num_classes")


def chance_pct(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.Series:
    """Per row of a per-cell table (accuracy_cells): chance top-1, 100 / the classes, in %: the top-1 of a
    guess, what an untrained or broken model scores. The classes are the data set's where meta.json
    counted them, else model.num_classes; NaN where neither is known or the table has no cell_hash."""
    if "cell_hash" not in cells or "cell_hash" not in runs:
        return pd.Series(np.nan, index=cells.index, dtype="float64")
    known = runs.reindex(columns=list(CLASSES_SETTINGS)).apply(pd.to_numeric, errors="coerce")
    classes = known[CLASSES_SETTINGS[0]].fillna(known[CLASSES_SETTINGS[1]]).where(lambda n: n >= 1)
    per_cell = classes.groupby(runs["cell_hash"].astype(str)).first()
    return (100.0 / cells["cell_hash"].astype(str).map(per_cell)).astype("float64")


def accuracy_curves(evals: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Validation top-1 over training, per cell and evaluation point (the optimizer steps done: repeats
    evaluate at the same steps): top1_pct, the mean over the repeats that evaluated there, with their
    min and max (top1_pct_min, _max), the epochs done (NaN in eval.jsonl files that predate the field),
    num_repeats, and the cell's columns (schedule and global batch with study_runs' per_run)."""
    by = _by_cell(per_run)
    columns = [*by, "step", "epochs", "top1_pct", "top1_pct_min", "top1_pct_max", "num_repeats"]
    if evals.empty:
        return pd.DataFrame(columns=columns)
    points = evals.reindex(columns=["run_id", "step", "epochs", "top1"]).assign(
        run_id=lambda d: d["run_id"].astype(str), epochs=lambda d: d["epochs"].astype("float64")
    )
    merged = points.merge(per_run[["run_id", *by]], on="run_id")
    stats = (
        merged.groupby([*by, "step"], dropna=False, observed=True)
        .agg(
            epochs=("epochs", "mean"),
            top1_pct=("top1", "mean"),
            top1_pct_min=("top1", "min"),
            top1_pct_max=("top1", "max"),
            num_repeats=("run_id", "nunique"),
        )
        .reset_index()
    )
    for column in ("top1_pct", "top1_pct_min", "top1_pct_max"):
        stats[column] *= 100
    out = _carried(per_run, by, extra=("schedule",)).merge(stats, on=by)
    return out.sort_values([c for c in [*CELL, "variant", "step"] if c in out]).reset_index(drop=True)


TRAINING_POINTS = 400  # points per cell in the loss and lr curves: more steps are binned


def training_curves(steps: pd.DataFrame, per_run: pd.DataFrame, *, max_points: int = TRAINING_POINTS) -> pd.DataFrame:
    """The training loss and the learning rate against the optimizer step, per cell, from the rank logs:
    every logged step (warm-up included: the schedule starts there), per step the mean loss over the ranks
    and the lr (the same on every rank), then the mean over repeats. A cell of more than max_points
    steps is binned into max_points runs of consecutive steps (their mean step, loss and lr), so a
    figure of 100k-step runs stays light. Only the runs of per_run; empty when no step has a loss or lr."""
    by = _by_cell(per_run)
    columns = [*by, "step", "loss", "lr"]
    if steps.empty or steps.reindex(columns=["loss", "lr"]).isna().all().all():
        return pd.DataFrame(columns=columns)
    rows = steps.reindex(columns=["run_id", "step", "loss", "lr"])
    rows = rows[rows[["loss", "lr"]].notna().any(axis=1)]
    per_step = rows.groupby(["run_id", "step"], observed=True)[["loss", "lr"]].mean().reset_index()
    per_step["run_id"] = per_step["run_id"].astype(str)
    merged = per_step.merge(per_run[["run_id", *by]], on="run_id")
    per_cell = merged.groupby([*by, "step"], dropna=False, observed=True)[["loss", "lr"]].mean().reset_index()
    grouped = per_cell.groupby(by, dropna=False, observed=True)
    width = np.ceil(grouped["step"].transform("size") / max(1, max_points)).astype("int64")
    per_cell["bin"] = grouped.cumcount() // width
    binned = per_cell.groupby([*by, "bin"], dropna=False, observed=True)[["step", "loss", "lr"]].mean().reset_index()
    out = _carried(per_run, by, extra=("schedule",)).merge(binned.drop(columns="bin"), on=by)
    return out.sort_values([c for c in [*CELL, "variant", "step"] if c in out]).reset_index(drop=True)


TARGET = ["target_top1_pct", "num_reached", "num_repeats", "time_to_target_s", "samples_to_target", "steps_to_target"]


def time_to_accuracy(runs: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Per cell whose runs had a target (run.target_top1; summary.json's rundir.TARGET_FIELDS): the
    target in %, num_reached of num_repeats, and over the repeats that reached it the mean
    time_to_target_s (seconds since the first training step, evaluations included: MLPerf's clock),
    samples_to_target and steps_to_target (NaN where none did). Only the runs of per_run."""
    by = _by_cell(per_run)
    columns = [*by, *[c for c in CARRIED if c not in by], "schedule", *TARGET]
    if "target_top1" not in runs:
        return pd.DataFrame(columns=columns)
    fields = runs.reindex(
        columns=["run_id", "target_top1", "target_reached", "time_to_target_s", "samples_to_target", "steps_to_target"]
    )
    fields = fields[pd.to_numeric(fields["target_top1"], errors="coerce").notna()].assign(
        run_id=lambda d: d["run_id"].astype(str)
    )
    if fields.empty:
        return pd.DataFrame(columns=columns)
    reached = fields["time_to_target_s"].notna() | fields["target_reached"].astype("boolean").fillna(False).astype(bool)
    fields = fields.assign(
        reached=reached,
        target_top1_pct=100 * fields["target_top1"].astype("float64"),
        **{c: pd.to_numeric(fields[c], errors="coerce").astype("float64") for c in TARGET[3:]},
    )
    merged = fields.merge(per_run[["run_id", *by]], on="run_id")
    stats = merged.groupby(by, dropna=False, observed=True).agg(
        target_top1_pct=("target_top1_pct", "first"),
        num_reached=("reached", "sum"),
        num_repeats=("run_id", "size"),
        **{c: (c, "mean") for c in TARGET[3:]},
    )
    out = _carried(per_run, by, extra=("schedule",)).merge(stats.reset_index(), on=by)
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


ACCURACY_COMPARED = ["top1_pct", "time_to_target_s", "num_reached", "num_targeted"]


def accuracy_by_key(per_run_accuracy: pd.DataFrame, runs: pd.DataFrame, key_of: pd.Series) -> pd.DataFrame:
    """One campaign's side of an accuracy comparison, per compare key (`key_of`: run_id -> match_keys'
    key): top1_pct, the final top-1 mean over its runs with evaluations; over its runs with a target,
    num_targeted, num_reached and the mean time_to_target_s of those that reached it. `runs`: the counted
    runs (with summary.json's target fields where any)."""
    top1 = (
        per_run_accuracy.assign(match_key=per_run_accuracy["run_id"].astype(str).map(key_of))
        .groupby("match_key")["top1_pct"]
        .mean()
    )
    fields = runs.reindex(columns=["run_id", "target_top1", "target_reached", "time_to_target_s"])
    fields = fields[pd.to_numeric(fields["target_top1"], errors="coerce").notna()]
    seconds = pd.to_numeric(fields["time_to_target_s"], errors="coerce").astype("float64")
    fields = fields.assign(
        match_key=fields["run_id"].astype(str).map(key_of),
        time_to_target_s=seconds,
        reached=seconds.notna() | fields["target_reached"].astype("boolean").fillna(False).astype(bool),
    )
    targets = fields.groupby("match_key").agg(
        time_to_target_s=("time_to_target_s", "mean"),
        num_reached=("reached", "sum"),
        num_targeted=("run_id", "size"),
    )
    out = pd.concat([top1, targets], axis=1).reindex(columns=ACCURACY_COMPARED)
    return out.rename_axis("match_key").reset_index()


TOP1_DROP_PP = 1.0  # compare: a final top-1 lower by more than this (percentage points) is a regression


def compare_accuracy(
    compared: pd.DataFrame,
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    top1_drop_pp: float = TOP1_DROP_PP,
    threshold: float = 0.05,
) -> pd.DataFrame:
    """compare()'s table with each cell's accuracy in A and B (accuracy_by_key's sides): top1_pct_a/_b
    and top1_delta_pp (B - A, percentage points), time_to_target_s_a/_b and time_to_target_rel_delta;
    and `regressed`, the metrics that regressed: throughput (compare's rule), top-1 (where both have
    evaluations, lower by more than top1_drop_pp), time to target (where both had the target: longer by
    more than `threshold`, or reached in A and never in B). A paired cell with any is a 'regression'."""
    if not 0 <= top1_drop_pp < 100 or math.isnan(top1_drop_pp):
        raise ValueError(f"top1_drop_pp={top1_drop_pp}: use percentage points in [0, 100), e.g. 1.0")
    sides = {tag: side.set_index("match_key").add_suffix(f"_{tag}") for tag, side in (("a", a), ("b", b))}
    out = compared.join(sides["a"], on="match_key").join(sides["b"], on="match_key")
    out["top1_delta_pp"] = out["top1_pct_b"] - out["top1_pct_a"]
    out["time_to_target_rel_delta"] = out["time_to_target_s_b"] / out["time_to_target_s_a"] - 1
    never = (out["num_reached_a"] > 0) & (out["num_targeted_b"] > 0) & (out["num_reached_b"] == 0)
    regressed = {
        "throughput": out["flag"] == "regression",
        "top-1": out["top1_delta_pp"] < -top1_drop_pp,
        "time to target": (out["time_to_target_rel_delta"] > threshold) | never,
    }
    out["regressed"] = [
        ", ".join(name for name, hit in zip(regressed, hits) if hit)
        for hits in zip(*(mask.fillna(False).to_numpy(dtype=bool) for mask in regressed.values()))
    ]
    paired = out["flag"].isin(["regression", "improvement", "ok"])
    out["flag"] = out["flag"].where(~(paired & (out["regressed"] != "")), "regression")
    return out


SYSTEM_PREFIX = "config.system."


def across_systems(cells: pd.DataFrame, runs: pd.DataFrame, *, baseline: str) -> pd.DataFrame:
    """Cells that differ only in their system profile, paired: per cell its system (system.name), a
    `configuration` key (every identity setting but system.* and run.campaign, plus the size) and its
    training time relative to the same configuration on the `baseline` system: the baseline's throughput
    over the cell's (same samples; above 1: slower), empty where that configuration did not run on the
    baseline. Settings a system resolves into other groups (a loader's worker count from the system's
    CPUs) keep cells apart: they are not the same configuration."""
    from benchmarks.rundir import is_identity_key

    columns = [*CELL, "variant", "system", "configuration", "throughput_img_s", "baseline_img_s", "relative_time"]
    if cells.empty or runs.empty or "cell_hash" not in runs:
        return pd.DataFrame(columns=columns)
    settings = [
        c
        for c in runs.columns
        if c.startswith("config.")
        and is_identity_key(c[len("config.") :])
        and not c.startswith(SYSTEM_PREFIX)
        and c != "config.run.campaign"
    ]
    text = runs[settings].apply(_setting_text) if settings else pd.DataFrame(index=runs.index)
    for size in ("world_size", "num_nodes"):
        text[size] = _setting_text(runs[size])
    per_run = pd.DataFrame(
        {
            "cell_hash": runs["cell_hash"],
            "system": runs.get("config.system.name", pd.Series("", index=runs.index)).fillna("").astype(str),
            "configuration": pd.util.hash_pandas_object(text, index=False).map(lambda h: f"{h & 0xFFFFFFFF:08x}"),
        }
    ).drop_duplicates("cell_hash")
    table = cells.merge(per_run, on="cell_hash", how="inner")
    base = table.loc[table["system"] == baseline, ["configuration", "throughput_img_s"]]
    base = base.rename(columns={"throughput_img_s": "baseline_img_s"}).drop_duplicates("configuration")
    table = table.merge(base, on="configuration", how="left")
    table["relative_time"] = table["baseline_img_s"] / table["throughput_img_s"]
    return table[[c for c in columns if c in table]].reset_index(drop=True)
