"""`ddlbench paper STUDY RUNS --out DIR`: each figure and table of a seed study, drawn from a campaign's
runs beside the study's published values. One module per study, or a package where it parts (aach2023/), with its exhibits in the study's order;
base.py says what a study and an exhibit are; build.py writes the report."""

from __future__ import annotations

import pandas as pd

from analysis.papers import aach2023, composable2023, stash2021
from analysis.papers.base import Study
from benchmarks.errors import ConfigError

STUDIES: dict[str, Study] = {s.name: s for s in (aach2023.STUDY, stash2021.STUDY, composable2023.STUDY)}


def study(name: str) -> Study:
    """The study of that name, or a one-line error listing the known ones."""
    if name not in STUDIES:
        raise ConfigError(
            f"STUDY {name!r} is not known; use one of: {', '.join(STUDIES)} (e.g. ddlbench paper aach2023 runs/)"
        )
    return STUDIES[name]


def study_of(runs: pd.DataFrame) -> pd.Series:
    """Per run, the study it belongs to: its experiment.study setting, else the study whose experiments
    make its campaign (runs made before experiment.study existed); '' for runs of no study."""
    by_campaign = {campaign: s.name for s in STUDIES.values() for campaign in s.campaigns}
    campaign = runs["campaign"] if "campaign" in runs else pd.Series("", index=runs.index)
    guessed = campaign.astype(str).map(by_campaign)
    explicit = (
        runs["config.experiment.study"]
        if "config.experiment.study" in runs
        else pd.Series(index=runs.index, dtype=object)
    )
    return explicit.where(explicit.notna() & (explicit.astype(str) != ""), guessed).fillna("").astype(str)
