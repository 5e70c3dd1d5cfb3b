"""The cell table, which every analysis starts from: per-run throughput, repeat statistics (t-intervals),
the cells (one configuration each, below), their sample unit and peak memory.

Pure: DataFrame in, DataFrame out; no I/O, no plotting. Names and definitions are docs/architecture.md's
(in full: docs/analysis.md). Pandas 3.0 and 3.1 both: no groupby.apply that returns frames; per-group
work is done with agg/transform and merges.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

# A cell is one configuration: `cell_hash`, the hash of every setting of the run plus its size
# (benchmarks/rundir/); repeats of a cell are runs with the same hash. A scaling curve is
# `group_hash` (weak: every setting but the size) or `strong_group_hash` (strong: the global batch held).
# These columns are what tables show of a cell; `variant` names any other setting that tells cells apart.
SCALING_GROUP = ["framework", "loader", "model", "precision", "per_gpu_batch"]
CELL = [*SCALING_GROUP, "world_size", "num_nodes"]
IDENTITY = ["cell_hash", "group_hash", "strong_group_hash"]
CARRIED = [*CELL, "variant", "global_batch", "campaign", "cache", *IDENTITY[1:]]
PHASES = ["data_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "comm_exposed_s", "step_s", "host_data_s"]
SHARES = ["data_share", "compute_share", "allreduce_share", "allreduce_exposed_share", "other_share", "host_data_share"]

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
    """The measured step records: not warm-up, not inside a profiler window (summary_schema.is_measured).
    `columns`: only those of them the step table has (it is wide, and copying every column of a
    campaign's rows is most of the cost for a caller that reads three)."""
    keep = ~steps["warmup"].astype(bool)
    if "profiled" in steps:
        keep &= ~steps["profiled"].fillna(False).astype(bool)
    if columns is None:
        return steps[keep]
    return steps[[c for c in columns if c in steps]][keep.to_numpy()]


def setting_text(values: pd.Series) -> pd.Series:
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
    Settings are the config.* columns of the run key (cell_identity.is_identity_key)."""
    from benchmarks.rundir.cell_identity import is_identity_key

    columns = [c for c in runs.columns if c.startswith("config.") and is_identity_key(c[len("config.") :])]
    if runs.empty or not columns:
        return pd.Series("", index=runs.index, dtype="object")
    shown = [c for c in SCALING_GROUP if c in runs]
    text = runs[columns].apply(setting_text)
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


def cell_key(frame: pd.DataFrame) -> list[str]:
    """The grouping of per-run rows into cells: the run key's hash, else (old tables) the shown columns."""
    return ["cell_hash"] if "cell_hash" in frame else [c for c in CELL if c in frame]


def carried_columns(frame: pd.DataFrame, by: list[str], *, extra: tuple[str, ...] = ()) -> pd.DataFrame:
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
    by = by or cell_key(per_run)
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
    by = cell_key(per_run)
    stats = repeat_stats(per_run, value="throughput_img_s", by=by, confidence=confidence)
    per_gpu = per_run.groupby(by, dropna=False, observed=True)["per_gpu_img_s"].median().reset_index()
    out = carried_columns(per_run, by).merge(stats, on=by).merge(per_gpu, on=by)
    out["throughput_img_s"] = out.pop("throughput_img_s_median")
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


def per_cell_mean(per_run_values: pd.DataFrame, per_run: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    by = cell_key(per_run)
    merged = per_run_values.merge(per_run[["run_id", *by]], on="run_id")
    means = merged.groupby(by, dropna=False, observed=True)[columns].mean().reset_index()
    out = carried_columns(per_run, by).merge(means, on=by)
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


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


DEFAULT_SAMPLE_UNIT = "images"  # what a run counted before summary.json said (sample_unit)


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
