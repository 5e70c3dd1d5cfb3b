"""`ddlbench compare`: two campaigns' cells matched by their settings, each flagged (regression,
improvement, ok, missing, incomplete), accuracy beside throughput; the cells of one campaign that
differ in one setting (`--by KEY=A,B`), and the same cells across systems (`paper --baseline`).

Every pairing goes through `pair`: a cell of one side pairs with a cell of the other only where each
side holds exactly one cell of their configuration; any other cell is shown alone, once.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.cells import CELL, setting_text
from benchmarks.errors import ConfigError
from benchmarks.rundir.cell_identity import ADDED_SETTING_DEFAULTS, is_identity_key

CAMPAIGN = "config.run.campaign"  # which campaign a run belongs to: never what a comparison pairs on
SIZE = ["world_size", "num_nodes"]
# per cell beside the throughput, as `results` shows them (analysis/efficiency.py): mfu_a/_b, energy_j_per_sample_a/_b
EFFICIENCY_COMPARED = ["mfu", "energy_j_per_sample"]


def identity_settings(runs: pd.DataFrame) -> list[str]:
    """The config.* columns of runs that are settings of the run key (benchmarks/rundir/)."""
    return sorted(c for c in runs.columns if c.startswith("config.") and is_identity_key(c[len("config.") :]))


def as_recorded(runs: pd.DataFrame) -> pd.DataFrame:
    """runs with each later-added setting (benchmarks/rundir/ ADDED_SETTING_DEFAULTS) that a run leaves out filled in with
    the value it ran as: analysis.load drops it at that value, so that runs from before the setting and after it
    are one cell within a campaign; across two campaigns where one side set it (data.stage=node_local) and the
    other did not, the comparison must see it on both sides to tell the cells apart and to pair --by it."""
    filled = runs.copy()
    configured = runs[CAMPAIGN].notna() if CAMPAIGN in runs else pd.Series(False, index=runs.index)  # has config.yaml
    for key, value in ADDED_SETTING_DEFAULTS.items():
        column = f"config.{key}"
        recorded = runs[column] if column in runs else pd.Series(pd.NA, index=runs.index, dtype=object)
        filled[column] = recorded.astype(object).where(recorded.notna() | ~configured, value)
    return filled


def _completed(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "completed"] if "status" in runs else runs


def differing_settings(a_runs: pd.DataFrame, b_runs: pd.DataFrame) -> list[str]:
    """The settings whose values differ between A's and B's completed runs, as `KEY (A: values; B: values)`: why
    no cell of one is a cell of the other."""
    a_runs, b_runs = (as_recorded(_completed(r)) for r in (a_runs, b_runs))
    common = sorted((set(identity_settings(a_runs)) & set(identity_settings(b_runs))) - {CAMPAIGN})
    said = []
    for column in common:
        values_a = sorted({v for v in setting_text(a_runs[column]).dropna() if v != ""})
        values_b = sorted({v for v in setting_text(b_runs[column]).dropna() if v != ""})
        if values_a != values_b:
            said.append(f"{_said(column)} (A: {', '.join(values_a)}; B: {', '.join(values_b)})")
    return said


def configurations(runs: pd.DataFrame, settings: list[str]) -> pd.Series:
    """Per run, one key for its values of `settings` and its size (world_size, num_nodes): runs with equal
    keys are one configuration over those settings. Each value as its setting reads, whatever the column's
    dtype (a column with gaps is float in one campaign and int in another, and 8.0 is 8). NA where the
    run's size is unknown."""
    text = pd.DataFrame({c: setting_text(runs[c]) if c in runs else "" for c in [*settings, *SIZE]}, index=runs.index)
    if runs.empty:
        return pd.Series(pd.NA, index=runs.index, dtype="string")
    hashed = pd.util.hash_pandas_object(text, index=False).map(lambda h: f"{h:016x}").astype("string")
    return hashed.where(runs.reindex(columns=["world_size"])["world_size"].notna().to_numpy())


def pair(a: pd.Series, b: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The one pairing of ddlbench: a, b hold per cell of each side (the index: the cell, its value: the
    configuration it is compared on) -> per cell its pair key. A configuration held by exactly one cell of
    each side pairs them (the key is the configuration); every other cell gets a key of its own ('A <cell>'
    or 'B <cell>'), so that it is shown once and alone: never pooled with a cell of its own side, never
    paired with one of several cells that would fit."""
    counts_a, counts_b = a.value_counts(), b.value_counts()

    def keys(side: pd.Series, tag: str) -> pd.Series:
        one_each = side.map(counts_a).eq(1) & side.map(counts_b).eq(1)
        alone = pd.Series([f"{tag} {cell}" for cell in side.index], index=side.index, dtype="string")
        return side.astype("string").where(one_each, alone)

    return keys(a, "A"), keys(b, "B")


def _pair_runs(
    a_runs: pd.DataFrame,
    b_runs: pd.DataFrame,
    on: list[str],
    *,
    a_in: pd.Series | None = None,
    b_in: pd.Series | None = None,
) -> tuple[pd.Series, pd.Series]:
    """Per run of A and of B, the pair key of its cell (`pair` on the configurations over `on`); a cell is
    every setting its side records. NA for runs of unknown size and runs outside a side (a_in, b_in False)."""
    cells_of, compared_on = [], []
    for runs, inside in ((a_runs, a_in), (b_runs, b_in)):
        cell = configurations(runs, identity_settings(runs))
        if inside is not None:
            cell = cell.where(inside.to_numpy())
        per_cell = pd.Series(configurations(runs, on).to_numpy(), index=cell.to_numpy())
        cells_of.append(cell)
        compared_on.append(per_cell[per_cell.index.notna()].groupby(level=0).first())
    key_a, key_b = pair(*compared_on)
    return cells_of[0].map(key_a).astype("string"), cells_of[1].map(key_b).astype("string")


def match_keys(a_runs: pd.DataFrame, b_runs: pd.DataFrame) -> tuple[pd.Series, pd.Series, list[str]]:
    """Per run of two campaigns, the key that pairs its cell with the same cell of the other (`pair`): cells
    are compared on every setting of the run key that both campaigns record (config.* columns, so that a
    setting added by a newer ddlbench does not part every cell) except run.campaign, plus world_size and
    num_nodes. A cell whose configuration is several cells' on a side (they differ in a setting the other
    campaign does not record) stands alone. Returns (A keys, B keys, the settings compared on)."""
    a_runs, b_runs = as_recorded(a_runs), as_recorded(b_runs)
    common = sorted((set(identity_settings(a_runs)) & set(identity_settings(b_runs))) - {CAMPAIGN})
    key_a, key_b = _pair_runs(a_runs, b_runs, common)
    return key_a, key_b, [*common, *SIZE]


# the cell table's columns that name a group's option (`--by framework=ddp,horovod`): the value a run shows
NAMED_GROUPS = ("framework", "loader", "model", "precision")


def by_setting(runs: pd.DataFrame, key: str) -> tuple[pd.Series, list[str]] | None:
    """What `--by KEY` reads of runs: per run the value of KEY (a group: its option, as tables name it;
    a setting: its value, as text) and the settings KEY covers (a group's every setting). None where
    runs hold no such group or setting."""
    covered = [c for c in identity_settings(runs) if c == f"config.{key}" or c.startswith(f"config.{key}.")]
    if not covered:
        return None
    if key in NAMED_GROUPS and key in runs:
        value = runs[key]
    elif f"config.{key}.name" in runs:
        value = runs[f"config.{key}.name"]
    elif f"config.{key}" in runs:
        value = runs[f"config.{key}"]
    else:
        return None
    return setting_text(value).astype("string"), covered


def _said(key: str) -> str:
    """A setting as --by takes it: a group's option by the group's name (framework, not framework.name)."""
    name = key.removeprefix("config.")
    return name.removesuffix(".name")


def varying_settings(runs: pd.DataFrame) -> list[str]:
    """The settings (as --by takes them) whose value differs between runs of a campaign: a group whose
    option differs by its name alone (framework, not its every setting)."""
    varying = [_said(c) for c in identity_settings(runs) if c != CAMPAIGN and setting_text(runs[c]).nunique() > 1]
    groups = {key for key in varying if "." not in key}
    return sorted(key for key in dict.fromkeys(varying) if key.split(".")[0] not in groups - {key} and "._" not in key)


def parse_by(text: str) -> tuple[str, str, str]:
    """--by KEY=A,B -> (KEY, A, B)."""
    key, _, values = text.partition("=")
    parts = [v.strip() for v in values.split(",")]
    if not key.strip() or len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ConfigError(
            f"--by {text}: give one setting and its two values to compare, KEY=A,B, e.g. --by framework=ddp,horovod"
        )
    return key.strip(), parts[0], parts[1]


def by_keys(a_runs: pd.DataFrame, b_runs: pd.DataFrame, by: tuple[str, str, str]) -> tuple[pd.Series, pd.Series]:
    """`compare --by KEY=A,B`: per run, the pair key of its cell among A's runs with KEY=A and B's runs
    with KEY=B (NA for the others), cells compared on every setting both record but KEY's settings and
    run.campaign (`pair`). A and B may be one campaign. Raises ConfigError, naming what the runs hold,
    where KEY or a value matches no run."""
    a_runs, b_runs = (as_recorded(a_runs), as_recorded(b_runs)) if a_runs is not b_runs else (as_recorded(a_runs),) * 2
    key, value_a, value_b = by
    sides = []
    for option, runs, value in (("A", a_runs, value_a), ("B", b_runs, value_b)):
        read = by_setting(runs, key)
        if read is None:
            held = ", ".join(varying_settings(runs)) or "none (every run has the same settings)"
            raise ConfigError(
                f"--by {key}={value_a},{value_b}: no run has a setting {key}; settings that differ between the runs: {held}"
            )
        values, covered = read
        if not (values == value).any():
            present = values.value_counts()
            listed = ", ".join(f"{v} ({n} runs)" for v, n in present.items()) or "none"
            where = "RUNS" if a_runs is b_runs else option
            raise ConfigError(
                f"--by {key}={value_a},{value_b}: no run of {where} has {key}={value}; {key} there: {listed}"
            )
        sides.append((values == value, covered))
    common = set(identity_settings(a_runs)) & set(identity_settings(b_runs))
    on = sorted(common - {CAMPAIGN} - set(sides[0][1]) - set(sides[1][1]))
    return _pair_runs(a_runs, b_runs, on, a_in=sides[0][0], b_in=sides[1][0])


def by_hint(a_runs: pd.DataFrame, b_runs: pd.DataFrame) -> tuple[str, str, str] | None:
    """Where two campaigns share no cell but all of A has one value of a setting, all of B another, and
    the cells pair once that setting is left out: (KEY, A's value, B's value), for `compare A B --by`.
    Single settings are tried before whole groups; None unless exactly one fits. Completed runs only: a run that
    failed before it wrote its config records no setting."""
    a_runs, b_runs = (as_recorded(_completed(r)) for r in (a_runs, b_runs))
    common = sorted((set(identity_settings(a_runs)) & set(identity_settings(b_runs))) - {CAMPAIGN})
    leaves = [_said(c) for c in common]
    groups = sorted({c.split(".")[1] for c in common} - set(leaves))
    for candidates in (leaves, groups):
        fits = []
        for key in dict.fromkeys(candidates):
            read_a, read_b = by_setting(a_runs, key), by_setting(b_runs, key)
            if read_a is None or read_b is None:
                continue
            values_a, values_b = read_a[0].dropna().unique(), read_b[0].dropna().unique()
            if len(values_a) != 1 or len(values_b) != 1 or values_a[0] == values_b[0]:
                continue
            on = sorted(set(common) - set(read_a[1]) - set(read_b[1]))
            if set(configurations(a_runs, on).dropna()) & set(configurations(b_runs, on).dropna()):
                fits.append((key, str(values_a[0]), str(values_b[0])))
        if fits:
            return fits[0] if len(fits) == 1 else None
    return None


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
    'incomplete in B' when B has runs of it but none counted (keys in `incomplete_in_b`); 'only in B'.
    A side's `device` (analysis.device) is carried as a cell's column, its `marks` (analysis.caveats) as
    marks_a / marks_b, its `image` (analysis.container_images) as image_a / image_b ('' where the cell is not on that
    side); num_repeats_a / _b are integers, null where the cell is on one side only."""
    if not 0 <= threshold < 1 or math.isnan(threshold):
        raise ValueError(f"threshold={threshold}: use a fraction in [0, 1), e.g. 0.05 for 5%")
    shown = [c for c in [*CELL, "device", "variant"] if c in a or c in b]
    stats = [value, f"{value}_ci_low", f"{value}_ci_high", "num_repeats", "marks", "image"]
    stats += [c for c in EFFICIENCY_COMPARED if c in a or c in b]

    def side(cells: pd.DataFrame, tag: str) -> pd.DataFrame:
        cells = cells.reindex(columns=["match_key", *shown, *stats])
        return cells.rename(columns={c: f"{c}_{tag}" for c in stats})

    out = side(a, "a").merge(side(b, "b"), on="match_key", how="outer", indicator=True, suffixes=("", "_from_b"))
    for column in shown:  # a cell only in B describes itself
        out[column] = out[column].where(out["_merge"] != "right_only", out[f"{column}_from_b"])
    out = out.drop(columns=[f"{c}_from_b" for c in shown])
    for tag in ("a", "b"):  # a cell on one side only leaves the other's count null, not a float
        out[f"num_repeats_{tag}"] = pd.to_numeric(out[f"num_repeats_{tag}"], errors="coerce").astype("Int64")
        out[f"marks_{tag}"] = out[f"marks_{tag}"].astype("object").fillna("")
        out[f"image_{tag}"] = out[f"image_{tag}"].astype("object").fillna("")
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
    """Cells that differ only in their system profile, paired (`pair`): per cell its system (system.name),
    a `configuration` key (every identity setting but system.* and run.campaign, plus the size) and its
    training time relative to the same configuration on the `baseline` system: the baseline's throughput
    over the cell's (same samples; above 1: slower), empty where that configuration did not run on the
    baseline, or where one side holds several cells of it (a baseline cell is its own baseline). Settings
    a system resolves into other groups (a loader's worker count from the system's CPUs) keep cells apart:
    they are not the same configuration."""
    columns = [*CELL, "variant", "system", "configuration", "throughput_img_s", "baseline_img_s", "relative_time"]
    if cells.empty or runs.empty or "cell_hash" not in runs:
        return pd.DataFrame(columns=columns)
    settings = [c for c in identity_settings(runs) if not c.startswith(SYSTEM_PREFIX) and c != CAMPAIGN]
    per_run = pd.DataFrame(
        {
            "cell_hash": runs["cell_hash"],
            "system": runs.get("config.system.name", pd.Series("", index=runs.index)).fillna("").astype(str),
            "configuration": configurations(runs, settings).str[:8],
        }
    ).drop_duplicates("cell_hash")
    table = cells.merge(per_run, on="cell_hash", how="inner")
    by_cell = table.set_index("cell_hash")
    on_baseline = by_cell[by_cell["system"] == baseline]
    base_img_s = on_baseline["throughput_img_s"].copy()
    for _, cells_there in by_cell[by_cell["system"] != baseline].groupby("system"):
        keys_base, keys_there = pair(on_baseline["configuration"], cells_there["configuration"])
        throughput_of = pd.Series(on_baseline["throughput_img_s"].to_numpy(), index=keys_base.to_numpy())
        base_img_s = pd.concat([base_img_s, keys_there.map(throughput_of).astype("float64")])
    table["baseline_img_s"] = table["cell_hash"].map(base_img_s).astype("float64")
    table["relative_time"] = table["baseline_img_s"] / table["throughput_img_s"]
    return table[[c for c in columns if c in table]].reset_index(drop=True)
