"""Broken inputs, one per golden directory under tests/data/analysis/broken."""

from __future__ import annotations

import pytest

from analysis.load import LogWarning, load_campaign
from tests.analysis.conftest import BROKEN


def test_rank_log_without_header_excludes_the_run():
    with pytest.warns(LogWarning, match="no header line"):
        campaign = load_campaign(BROKEN / "no-header")
    assert campaign.runs["status"].item() == "corrupt"
    assert "rank0.jsonl has no header line" in campaign.runs["reason"].item()
    assert campaign.steps.empty


def test_truncated_last_line_is_skipped_and_the_run_counts():
    with pytest.warns(LogWarning, match=r"line 5: truncated last line"):
        campaign = load_campaign(BROKEN / "truncated-tail")
    assert campaign.runs["status"].item() == "completed"
    assert list(campaign.steps["step"]) == [0, 1, 2]


def test_unknown_schema_version_in_a_rank_header_excludes_the_run():
    campaign = load_campaign(BROKEN / "v2-rank-header")
    assert campaign.runs["status"].item() == "unsupported"
    assert "schema_version 7 in rank0.jsonl is not supported" in campaign.runs["reason"].item()
    assert campaign.steps.empty


def test_unreadable_summary_excludes_the_run():
    with pytest.warns(LogWarning, match="unreadable summary.json"):
        campaign = load_campaign(BROKEN / "corrupt-summary")
    assert campaign.runs["status"].item() == "corrupt"


def test_all_broken_together_counts_only_the_truncated_tail():
    with pytest.warns(LogWarning):
        campaign = load_campaign(BROKEN)
    assert list(campaign.counted["cell"]) == ["truncated-tail"]
    assert set(campaign.excluded["status"]) == {"corrupt", "unsupported"}


def test_a_null_step_line_is_skipped_not_a_crash(copy_of):
    """A rank log line `null` (valid JSON, not a record) crashed the process inside Arrow's JSON reader
    (pyarrow 26, SIGSEGV with an explicit schema; found by the fuzz test): it goes line by line, and is
    skipped and named."""
    run = copy_of(BROKEN / "truncated-tail")
    log = run / "rank0.jsonl"
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join([lines[0], b"null", *lines[1:4]]) + b"\n")
    with pytest.warns(LogWarning, match=r"line 2: .*"):
        campaign = load_campaign(run)
    assert campaign.runs["status"].item() == "completed"
    assert list(campaign.steps["step"]) == [0, 1, 2]
