"""`ddlbench compare`: two campaigns' cells matched by their settings, each flagged (regression,
improvement, ok, missing, incomplete), accuracy beside throughput, and the same cells across systems.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.cells import CELL, setting_text


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
        present = runs.reindex(columns=common).apply(setting_text)
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
    text = runs[settings].apply(setting_text) if settings else pd.DataFrame(index=runs.index)
    for size in ("world_size", "num_nodes"):
        text[size] = setting_text(runs[size])
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
