"""Breakdown arithmetic: intervals, the DDP comm timer's formula, the timer breakdown of golden step logs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis.breakdown import disagreement_pp, read_step_records, timer_breakdown
from benchmarks.frameworks.ddp import comm_total_exposed
from benchmarks.tracereduce import intersect, length, subtract, union

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "traces" / "ddp-gloo-g2"


def test_union_intersect_subtract():
    assert union([(5, 7), (0, 2), (1, 3), (7, 8), (9, 9)]) == [(0, 3), (5, 8)]
    assert intersect([(0, 3), (5, 8)], [(2, 6)]) == [(2, 3), (5, 6)]
    assert subtract([(0, 10)], [(2, 3), (5, 6), (9, 12)]) == [(0, 2), (3, 5), (6, 9)]
    assert length(union([(0, 2), (1, 4)])) == 4


def test_comm_total_is_the_union_and_exposed_runs_from_the_last_enqueue():
    # (ready, done, queued): bucket 2 waits behind bucket 1 on the comm stream
    stamps = [(0.0, 3.0, 0.5), (2.0, 5.0, 2.5), (8.0, 9.0, 8.2)]
    total, exposed = comm_total_exposed(stamps, end_s=10.0)
    assert total == pytest.approx(5.0 + 1.0)
    assert exposed == pytest.approx(10.0 - 8.2)
    # everything overlapped: backward returned after the last transfer, without waiting
    assert comm_total_exposed([(0.0, 1.0, 0.0)], end_s=0.0) == (1.0, 0.0)


def golden_records() -> list[dict]:
    # three steps by hand: 100 ms each; data 10, fwd 20, bwd 60 (10 of them waiting), opt 10
    return [
        {
            "step": s,
            "warmup": s == 0,
            "samples": 32,
            "data_s": 0.010,
            "fwd_s": 0.020,
            "bwd_s": 0.060,
            "opt_s": 0.010,
            "step_s": 0.100,
            "comm_s": 0.040,
            "comm_exposed_s": 0.010,
        }
        for s in range(3)
    ]


def test_timer_breakdown_of_hand_computed_steps():
    timer = timer_breakdown(golden_records())  # measured steps: 1 and 2
    assert timer.steps == [1, 2]
    shares = timer.shares()
    assert shares["data"] == pytest.approx(0.1)
    assert shares["compute"] == pytest.approx(0.8)  # fwd + bwd + opt - exposed
    assert shares["comm_exposed"] == pytest.approx(0.1)
    assert shares["comm_total"] == pytest.approx(0.4)
    assert shares["other"] == pytest.approx(0.0, abs=1e-12)
    assert sum(shares[k] for k in ("data", "compute", "comm_exposed", "other")) == pytest.approx(1.0)


def test_timer_breakdown_without_comm_timing():
    records = [{k: v for k, v in r.items() if not k.startswith("comm")} for r in golden_records()]
    timer = timer_breakdown(records, steps=[0, 1, 2])
    assert timer.comm_total_s is None and math.isnan(timer.shares()["comm_total"])
    assert timer.shares()["compute"] == pytest.approx(0.9)


def test_golden_step_log_shares_add_up():
    records = read_step_records(GOLDEN / "rank0.jsonl")
    assert [r["step"] for r in records] == list(range(8))
    assert all(r["comm_s"] is not None and 0 <= r["comm_exposed_s"] <= r["step_s"] for r in records)
    timer = timer_breakdown(records, steps=[3, 4, 5, 6])
    shares = timer.shares()
    assert sum(shares[k] for k in ("data", "compute", "comm_exposed", "other")) == pytest.approx(1.0)
    assert timer.step_s == pytest.approx(sum(r["step_s"] for r in records[3:7]))


def test_disagreement_is_the_largest_gap_in_points():
    assert disagreement_pp({"a": (0.5, 0.47), "b": (0.1, 0.12)}) == pytest.approx(3.0)


def test_no_step_in_range_is_an_error():
    with pytest.raises(ValueError, match="no step record"):
        timer_breakdown(golden_records(), steps=[42])
