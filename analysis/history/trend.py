"""A cell over time (a series: one cell's runs across campaigns, `series_hash`), its change points and the CI
check. Pure: the store's runs (analysis.history.store read_store) in, DataFrames out; no I/O, no plotting.

The rule (docs/history.md): campaigns of a series are taken in date order; each is compared with the reference,
the campaigns since the last change (all of them before the first). A campaign is a change where its mean
differs from the reference's mean by more than the noise allows AND by at least `min_change` of it:

- noise from repeats (campaigns with 2+ runs): the pooled within-campaign standard deviation s_w (df = the sum
  of n - 1), and the standard error of the difference se = s_w * sqrt(1/n_new + 1/n_ref);
- noise from the cell's own history (3+ reference campaigns): the standard deviation s_b of the reference's
  campaign means, se = s_b * sqrt(1 + 1/k) (a new campaign's mean against k past ones), df = k - 1; where both
  exist the larger se is used (campaign-to-campaign drift on top of run-to-run noise);
- a change: |mean_new - mean_ref| > t(confidence, df) * se (Student t, analysis.cells.t_quantile) and
  |mean_new / mean_ref - 1| >= min_change; with neither noise estimate the campaign gets no verdict.

A change starts a new reference: what follows is compared with the new level, not the old one.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from analysis.cells import t_quantile
from analysis.history.store import VERSIONS

CONFIDENCE = 0.95
MIN_CHANGE = 0.05  # a 5 % step, whatever the noise: smaller ones are no news to a centre
VALUE = "throughput_img_s"
# what a campaign table shows per series and campaign beside the value (medians over its runs)
SHOWN = (
    "per_gpu_img_s",
    "efficiency",
    "mfu",
    "energy_j_per_sample",
    "data_share",
    "allreduce_exposed_share",
    "step_s_cv",
)
# what may differ between the two sides of a change (the run's record, no setting of the cell)
RECORDED = (*VERSIONS, "hosts", "gpu_model", "cpu_model")
NOTHING_DIFFERS = "nothing recorded differs (versions, hosts, image, settings outside the cell): look at what is not recorded (load beside the runs, thermals, firmware, the fabric)"
FIRST, CHANGE, NONE, NO_NOISE = "first", "change", "none", "no noise estimate"


def _series_key(runs: pd.DataFrame) -> pd.Series:
    return runs["series_hash"].fillna(runs["cell_hash"]) if "series_hash" in runs else runs["cell_hash"]


def campaigns(runs: pd.DataFrame, *, value: str = VALUE) -> pd.DataFrame:
    """Per series and campaign, in date order: its label, date (its first run's start), runs, the mean,
    median and standard deviation of `value` over its runs, the medians of SHOWN, its marks."""
    runs = runs.assign(series=_series_key(runs), campaign=runs["campaign"].fillna(""))
    grouped = runs.groupby(["series", "campaign"], sort=False)
    out = grouped.agg(
        label=("label", "first"),
        started_s=("started_s", "min"),
        date=("started", "min"),
        num_runs=(value, "size"),
        mean=(value, "mean"),
        median=(value, "median"),
        std=(value, "std"),
        **{c: (c, "median") for c in SHOWN if c in runs},
        marks=("marks", lambda m: "; ".join(dict.fromkeys(t for t in m.fillna("") if t))),
    ).reset_index()
    # a label names a cell's main settings only: series that share one (they differ in another setting, e.g.
    # run.steps) take their series' hash too, so that no two series read alike
    shared = out.groupby("label")["series"].transform("nunique") > 1
    out.loc[shared, "label"] = out.loc[shared, "label"] + " #" + out.loc[shared, "series"].astype(str).str[:6]
    return out.sort_values(["series", "started_s", "campaign"]).reset_index(drop=True)


def _noise(table: pd.DataFrame, ref: list[int], new: int) -> tuple[float, float, str]:
    """(standard error of new's mean minus the reference's, degrees of freedom, where the noise came from);
    NaN where neither repeats nor history say."""
    rows = table.loc[[*ref, new]]
    repeated = rows[rows["num_runs"] >= 2]
    n_new, n_ref = table.at[new, "num_runs"], table.loc[ref, "num_runs"].sum()
    se, df, source = math.nan, math.nan, ""
    if not repeated.empty:
        df_w = float((repeated["num_runs"] - 1).sum())
        s_w = math.sqrt(float(((repeated["num_runs"] - 1) * repeated["std"] ** 2).sum()) / df_w)
        se, df, source = s_w * math.sqrt(1 / n_new + 1 / n_ref), df_w, "repeats"
    if len(ref) >= 3:
        s_b = float(table.loc[ref, "mean"].std(ddof=1))
        se_b = s_b * math.sqrt(1 + 1 / len(ref))
        if not se_b <= se:  # also where se is NaN
            se, df, source = se_b, float(len(ref) - 1), "history"
    return se, df, source


def change_points(
    runs: pd.DataFrame,
    *,
    value: str = VALUE,
    higher_is_better: bool = True,
    confidence: float = CONFIDENCE,
    min_change: float = MIN_CHANGE,
) -> pd.DataFrame:
    """Per series and campaign (campaigns' rows): the rule's verdict (`first`, `change`, `none`, `no noise
    estimate`), the reference it was compared with (`reference`: its campaigns, `reference_mean`), `change_pct`,
    `threshold_pct` (what the noise allowed), `noise_from`, `direction` (better or worse, for a change) and
    `differs`: what the runs' record says changed from the campaign before (for a change: else '')."""
    table = campaigns(runs, value=value)
    columns = {
        "verdict": [],
        "reference": [],
        "reference_mean": [],
        "change_pct": [],
        "threshold_pct": [],
        "noise_from": [],
        "direction": [],
        "differs": [],
    }
    runs = runs.assign(series=_series_key(runs), campaign=runs["campaign"].fillna(""))
    for _, rows in table.groupby("series", sort=False):
        index = list(rows.index)
        ref: list[int] = []
        for position, k in enumerate(index):
            if not ref:
                verdict, said = FIRST, (None, math.nan, math.nan, math.nan, "", "", "")
            else:
                ref_mean = float(np.average(table.loc[ref, "mean"], weights=table.loc[ref, "num_runs"]))
                delta = table.at[k, "mean"] - ref_mean
                se, df, source = _noise(table, ref, k)
                allowed = float(t_quantile(int(df), confidence=confidence)) * se if df >= 1 else math.nan
                relative = delta / ref_mean if ref_mean else math.nan
                if math.isnan(allowed):
                    verdict = NO_NOISE
                elif abs(delta) > allowed and abs(relative) >= min_change:
                    verdict = CHANGE
                else:
                    verdict = NONE
                worse = (delta < 0) == higher_is_better
                differs = ""
                if verdict == CHANGE:
                    before = table.at[index[position - 1], "campaign"]
                    series = table.at[k, "series"]
                    differs = differences(
                        runs[(runs["series"] == series) & (runs["campaign"] == before)],
                        runs[(runs["series"] == series) & (runs["campaign"] == table.at[k, "campaign"])],
                    )
                said = (
                    ", ".join(table.loc[ref, "campaign"]),
                    ref_mean,
                    100 * relative,
                    100 * allowed / ref_mean if ref_mean else math.nan,
                    source,
                    ("worse" if worse else "better") if verdict == CHANGE else "",
                    differs,
                )
            for name, item in zip(list(columns)[1:], said):
                columns[name].append(item)
            columns["verdict"].append(verdict)
            ref = [k] if verdict == CHANGE else [*ref, k]
    return table.assign(**{name: values for name, values in columns.items()})


def _said(values: pd.Series) -> str:
    shown = sorted({str(v) for v in values.dropna() if str(v) != ""})
    return " + ".join(shown) if shown else "-"


def _settings(runs: pd.DataFrame) -> dict[str, set[str]]:
    """Each setting outside the cell (the store's settings JSON) and its values over runs."""
    out: dict[str, set[str]] = {}
    for text in runs["settings"].dropna() if "settings" in runs else []:
        try:
            settings = json.loads(text)
        except ValueError:
            continue
        for key, value in settings.items():
            out.setdefault(key, set()).add(json.dumps(value) if not isinstance(value, str) else value)
    return out


def differences(before: pd.DataFrame, after: pd.DataFrame) -> str:
    """What the record says changed between two sets of runs of one cell: versions, hosts, image, the
    settings outside the cell and the runs' marks, as 'torch 2.14.1 -> 2.15.0; hosts n1 -> n7'; NOTHING_DIFFERS
    where every recorded value is the same."""
    said = []
    for column in RECORDED:
        if column in before and column in after:
            a, b = _said(before[column]), _said(after[column])
            if a != b:
                said.append(f"{column} {a} -> {b}")
    settings_a, settings_b = _settings(before), _settings(after)
    for key in sorted(set(settings_a) | set(settings_b)):
        a, b = settings_a.get(key, set()), settings_b.get(key, set())
        if a != b:
            said.append(f"{key} {' + '.join(sorted(a)) or '-'} -> {' + '.join(sorted(b)) or '-'}")
    marks_a, marks_b = (
        _said(before.get("marks", pd.Series(dtype=object))),
        _said(after.get("marks", pd.Series(dtype=object))),
    )
    if marks_a != marks_b:
        said.append(f"marks {marks_a} -> {marks_b}")
    return "; ".join(said) if said else NOTHING_DIFFERS


def check(changes: pd.DataFrame) -> pd.DataFrame:
    """The CI check's failures: per series whose newest campaign is a change for the worse, that row."""
    newest = changes.groupby("series", sort=False).tail(1)
    return newest[(newest["verdict"] == CHANGE) & (newest["direction"] == "worse")].reset_index(drop=True)


def check_lines(failures: pd.DataFrame, *, unit: str = "img/s") -> list[str]:
    """One line per failing series: the cell, the campaign and date, the step, its noise, what differs."""
    return [
        f"{row.label}: campaign {row.campaign} ({str(row.date)[:10]}) {row.mean:,.1f} {unit}, "
        f"{row.change_pct:+.1f}% against {row.reference} ({row.reference_mean:,.1f}; noise allows "
        f"±{row.threshold_pct:.1f}% from {row.noise_from}); differs: {row.differs}"
        for row in failures.itertuples(index=False)
    ]
