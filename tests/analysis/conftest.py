"""Golden run directories (tests/data/analysis) for the analysis tests."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data" / "analysis"
HAND = DATA / "hand"  # two hand-written runs whose metrics are computed by hand in the tests
CAMPAIGN = DATA / "campaign"  # a small synthetic_logs campaign: complete, failed, truncated, corrupt line, schema 2
BROKEN = DATA / "broken"  # one broken input per directory


@pytest.fixture
def campaign():
    from analysis.load import load_campaign

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_campaign(CAMPAIGN)


@pytest.fixture
def hand():
    from analysis.load import load_campaign

    return load_campaign(HAND)


@pytest.fixture
def copy_of(tmp_path):
    def copy(source: Path) -> Path:
        target = tmp_path / source.name
        shutil.copytree(source, target)
        return target

    return copy
