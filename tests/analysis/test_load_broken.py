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


@pytest.mark.parametrize("arrow", [True, False])
def test_a_diverged_loss_keeps_its_steps_as_the_summary_counts_them(copy_of, monkeypatch, arrow):
    """A NaN loss (fp16 overflow: RetinaNet at the study's lr, on the H200) is the training's outcome, not a
    broken line: the step was run and timed, and summary.json's throughput counts it; so do the steps table
    and with it every command. The loss is null there, and the divergence is named."""
    import json

    from analysis.load import ranklogs

    monkeypatch.setattr(ranklogs, "HAVE_ARROW", ranklogs.HAVE_ARROW and arrow)
    run = copy_of(BROKEN / "truncated-tail")
    log = run / "rank0.jsonl"
    lines = log.read_bytes().split(b"\n")
    records = [json.loads(line) for line in lines[1:4]]
    for record, loss in zip(records, (2.3, float("nan"), float("inf"))):
        record["loss"] = loss
    log.write_bytes(b"\n".join([lines[0], *(json.dumps(r).encode() for r in records)]) + b"\n")
    with pytest.warns(LogWarning, match=r"the training diverged \(loss not finite\) at 2 step\(s\) from step 1"):
        campaign = load_campaign(run)
    assert list(campaign.steps["step"]) == [0, 1, 2]
    assert campaign.steps["loss"].isna().tolist() == [False, True, True]
    assert campaign.problems["problem"].str.contains("loss nan: the training diverged; the step is kept").any()
