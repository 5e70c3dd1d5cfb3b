"""The cell table (analysis.cells) and the analyses' metrics against hand-computed values (tests/data/analysis/hand and inline frames)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.cells import cells, measured, repeat_stats, run_throughput, step_times
from analysis.compare import compare
from analysis.scaling import scaling
from analysis.stability import loader_stalls, rank_imbalance, step_stability, step_stability_runs
from analysis.stash import stash_stalls
from analysis.time_shares import breakdown

G1 = "ddp-synthetic-simple_cnn-g1-n1-b4-r0"
G2 = "ddp-synthetic-simple_cnn-g2-n1-b4-r0"


def test_slowest_rank_defines_each_step(hand):
    per_step = step_times(hand.steps)
    g2 = per_step[per_step["run_id"] == G2]
    assert list(g2["step"]) == [1, 2]  # the warmup step is not measured
    assert list(g2["step_s"]) == pytest.approx([0.5, 0.6])  # rank 0 slowest in step 1, rank 1 in step 2
    assert list(g2["samples"]) == [8, 8]


def test_throughput_recomputed_from_steps(hand):
    per_run = run_throughput(hand.steps, hand.counted).set_index("run_id")
    # 2 ranks x 2 measured steps x 4 samples over 0.5 + 0.6 s
    assert per_run.loc[G2, "throughput_img_s"] == pytest.approx(16 / 1.1)
    assert per_run.loc[G2, "per_gpu_img_s"] == pytest.approx(8 / 1.1)
    assert per_run.loc[G2, "summary_throughput_img_s"] == pytest.approx(16 / 1.2)
    assert per_run.loc[G1, "throughput_img_s"] == pytest.approx(8 / 1.0)
    assert per_run.loc[G2, "per_gpu_samples"] == 8


def test_weak_scaling_on_hand_runs(hand):
    per_run = run_throughput(hand.steps, hand.counted)
    scaled = scaling(cells(per_run), mode="weak").set_index("world_size")
    assert scaled.loc[1, "efficiency"] == pytest.approx(1.0)
    assert scaled.loc[2, "efficiency"] == pytest.approx((8 / 1.1) / 8)
    assert scaled.loc[2, "speedup"] == pytest.approx((16 / 1.1) / 8)


def _cells(**columns) -> pd.DataFrame:
    n = len(next(iter(columns.values())))
    base = {
        "framework": ["ddp"] * n,
        "loader": ["native"] * n,
        "model": ["resnet50"] * n,
        "precision": ["fp32"] * n,
        "num_nodes": [1] * n,
    }
    return pd.DataFrame({**base, **columns})


def test_weak_and_strong_scaling_formulas():
    weak = _cells(
        per_gpu_batch=[64] * 3,
        global_batch=[64, 128, 256],
        world_size=[1, 2, 4],
        throughput_img_s=[100.0, 180.0, 320.0],
        per_gpu_img_s=[100.0, 90.0, 80.0],
    )
    out = scaling(weak, mode="weak")
    assert list(out["efficiency"]) == pytest.approx([1.0, 0.9, 0.8])
    assert list(out["speedup"]) == pytest.approx([1.0, 1.8, 3.2])
    strong = _cells(
        per_gpu_batch=[256, 128, 64],
        global_batch=[256] * 3,
        world_size=[1, 2, 4],
        throughput_img_s=[100.0, 180.0, 300.0],
        per_gpu_img_s=[100.0, 90.0, 75.0],
    )
    out = scaling(strong, mode="strong")
    assert list(out["speedup"]) == pytest.approx([1.0, 1.8, 3.0])
    assert list(out["efficiency"]) == pytest.approx([1.0, 0.9, 0.75])


def test_chosen_baseline_and_missing_baseline():
    table = _cells(
        per_gpu_batch=[64] * 3,
        global_batch=[128, 256, 512],
        world_size=[2, 4, 8],
        throughput_img_s=[200.0, 360.0, 640.0],
        per_gpu_img_s=[100.0, 90.0, 80.0],
    )
    out = scaling(table, mode="weak", baseline_world_size=4)
    assert list(out["efficiency"]) == pytest.approx([100 / 90, 1.0, 80 / 90])
    out = scaling(table, mode="weak", baseline_world_size=1)
    assert out["efficiency"].isna().all()  # no run at N0: no efficiency


def test_repeat_statistics_median_and_t_interval():
    runs = _cells(per_gpu_batch=[64] * 3, world_size=[4] * 3, throughput_img_s=[10.0, 12.0, 14.0])
    stats = repeat_stats(runs)
    row = stats.iloc[0]
    assert row["throughput_img_s_median"] == 12.0 and row["num_repeats"] == 3
    half = 4.303 * 2.0 / np.sqrt(3)  # t(0.975, df=2) x s / sqrt(n)
    assert row["throughput_img_s_ci_low"] == pytest.approx(12 - half)
    assert row["throughput_img_s_ci_high"] == pytest.approx(12 + half)
    single = repeat_stats(runs.iloc[:1])
    assert np.isnan(single["throughput_img_s_ci_low"].item())


def test_breakdown_shares_by_hand(hand):
    shares = breakdown(hand.steps).set_index("run_id")
    g2 = shares.loc[G2]
    # sums over ranks and measured steps: step 1.8, data 0.35, fwd+bwd+opt 1.3, comm 0.33, exposed 0.12
    assert g2["data_share"] == pytest.approx(0.35 / 1.8)
    assert g2["compute_share"] == pytest.approx((1.3 - 0.12) / 1.8)
    assert g2["allreduce_share"] == pytest.approx(0.33 / 1.8)
    assert g2["allreduce_exposed_share"] == pytest.approx(0.12 / 1.8)
    assert g2["other_share"] == pytest.approx(0.15 / 1.8)
    assert g2[["data_share", "compute_share", "allreduce_exposed_share", "other_share"]].sum() == pytest.approx(1.0)
    g1 = shares.loc[G1]  # collectives not timed: allreduce unknown, all of fwd+bwd+opt is compute
    assert np.isnan(g1["allreduce_share"]) and not g1["comm_measured"]
    assert g1["compute_share"] == pytest.approx(0.8 / 1.0)
    assert shares["host_data_share"].isna().all()  # logs from before the host times


def test_host_data_share_sees_a_late_batch_the_gpu_timer_hides(hand):
    steps = hand.steps.copy()
    # every measured step waited 40 ms on the host for its batch, hidden from data_s by queued work
    steps["host_data_s"] = 0.040
    shares = breakdown(steps).set_index("run_id")
    rows = measured(steps)
    for run, row in shares.iterrows():
        mine = rows[rows["run_id"] == run]
        assert row["host_data_share"] == pytest.approx(0.040 * len(mine) / mine["step_s"].sum())


def test_loader_stalls_by_hand():
    """Run a: every 3rd of 6 steps the host waits 40 ms for a 60 ms step's batch; run b never waits."""
    rows = []
    for run, waits in (("a", [0.040 if s % 3 == 0 else 0.0005 for s in range(6)]), ("b", [0.0005] * 6)):
        for step, wait in enumerate(waits):
            rows.append(
                {
                    "run_id": run,
                    "rank": 0,
                    "step": step,
                    "warmup": False,
                    "samples": 8,
                    "data_s": 0.001,
                    "step_s": 0.060,
                    "host_data_s": wait,
                }
            )
    rows.append(
        {
            "run_id": "a",
            "rank": 0,
            "step": -1,
            "warmup": True,
            "samples": 8,
            "data_s": 0.5,
            "step_s": 1.0,
            "host_data_s": 0.9,
        }
    )  # warm-up: not counted
    stalls = loader_stalls(pd.DataFrame(rows))
    assert list(stalls["run_id"]) == ["a"]  # b: 0.8% of its step time, under the 5% line
    a = stalls.iloc[0]
    assert a["host_data_pct"] == pytest.approx(100 * (2 * 0.040 + 4 * 0.0005) / (6 * 0.060))
    assert a["data_pct"] == pytest.approx(100 * 0.001 / 0.060)
    assert a["waiting_steps_pct"] == pytest.approx(100 * 2 / 6)
    assert a["max_wait_ms"] == pytest.approx(40.0)
    old = pd.DataFrame(rows).drop(columns="host_data_s")  # logs from before the host times
    assert loader_stalls(old).empty


def test_stash_stalls_from_paired_runs():
    per_run = pd.DataFrame(
        {
            "framework": "ddp",
            "model": "resnet50",
            "precision": "fp32",
            "per_gpu_batch": 32,
            "per_gpu_samples": 3200.0,
            "loader": ["synthetic", "synthetic", "synthetic", "native", "native", "synthetic"],
            "cache": ["warm", "warm", "warm", "warm", "cold", "warm"],
            "world_size": [1, 4, 4, 4, 4, 1],
            "num_nodes": [1, 1, 2, 1, 1, 1],
            "time_s": [10.0, 12.0, 15.0, 13.0, 20.0, 10.0],
        }
    )
    stalls = stash_stalls(per_run).set_index("stall")
    assert stalls.loc["interconnect", "stall_s"] == pytest.approx(2.0)
    assert stalls.loc["interconnect", "stall_pct"] == pytest.approx(20.0)
    assert stalls.loc["network", "stall_s"] == pytest.approx(3.0)
    assert stalls.loc["network", "stall_pct"] == pytest.approx(25.0)
    assert stalls.loc["cpu", "stall_s"] == pytest.approx(1.0)
    assert stalls.loc["disk", "stall_s"] == pytest.approx(7.0)
    assert stalls.loc["disk", "stall_pct"] == pytest.approx(700 / 13)


def test_stash_pairs_only_same_per_gpu_samples():
    per_run = pd.DataFrame(
        {
            "framework": "ddp",
            "model": "resnet50",
            "precision": "fp32",
            "per_gpu_batch": 32,
            "per_gpu_samples": [3200.0, 6400.0],
            "loader": "synthetic",
            "world_size": [1, 4],
            "num_nodes": 1,
            "time_s": [10.0, 24.0],
        }
    )
    assert stash_stalls(per_run).empty


def test_compare_flags_a_regression():
    a = _cells(
        per_gpu_batch=[64] * 3,
        world_size=[1, 2, 4],
        throughput_img_s=[100.0, 200.0, 400.0],
        match_key=["k1", "k2", "k4"],
    )
    b = _cells(
        per_gpu_batch=[64] * 3,
        world_size=[1, 2, 8],
        throughput_img_s=[90.0, 204.0, 700.0],
        match_key=["k1", "k2", "k8"],
    )
    out = compare(a, b, threshold=0.05).set_index("world_size")
    assert out.loc[1, "flag"] == "regression" and out.loc[1, "rel_delta"] == pytest.approx(-0.1)
    assert out.loc[1, "judged_by"] == "threshold 5% (a single repeat: no CI)"
    assert out.loc[2, "flag"] == "ok"
    assert out.loc[4, "flag"] == "missing in B" and out.loc[8, "flag"] == "only in B"
    assert compare(a, b, threshold=0.2).loc[0, "flag"] == "ok"
    assert compare(a, b, incomplete_in_b={"k4"}).set_index("world_size").loc[4, "flag"] == "incomplete in B"


def test_compare_judges_repeats_by_their_confidence_intervals():
    a = _cells(
        per_gpu_batch=[64] * 2,
        world_size=[1, 2],
        throughput_img_s=[100.0, 200.0],
        match_key=["k1", "k2"],
        throughput_img_s_ci_low=[99.0, 150.0],
        throughput_img_s_ci_high=[101.0, 250.0],
        num_repeats=[3, 3],
    )
    b = _cells(
        per_gpu_batch=[64] * 2,
        world_size=[1, 2],
        throughput_img_s=[90.0, 180.0],
        match_key=["k1", "k2"],
        throughput_img_s_ci_low=[89.0, 130.0],
        throughput_img_s_ci_high=[91.0, 230.0],
        num_repeats=[3, 3],
    )
    out = compare(a, b, threshold=0.05).set_index("world_size")
    assert out.loc[1, "flag"] == "regression"  # -10%, intervals apart
    assert out.loc[2, "flag"] == "ok"  # -10% but within the noise of the repeats
    assert out.loc[2, "judged_by"] == "threshold 5% + 95% CIs"


def test_step_stability_by_hand():
    # 10 measured steps of 1 s on the slowest rank, two of them 2 s; the other rank is always faster
    slowest = [1.0] * 8 + [2.0, 2.0]
    rows = [
        {
            "run_id": "a",
            "step": step,
            "rank": rank,
            "samples": 4,
            "warmup": False,
            "step_s": slowest[step] if rank == 0 else 0.9,
        }
        for step in range(10)
        for rank in (0, 1)
    ]
    rows.append({"run_id": "a", "step": -1, "rank": 0, "samples": 4, "warmup": True, "step_s": 50.0})  # not measured
    per_run = pd.DataFrame(
        [
            {
                "run_id": "a",
                "framework": "ddp",
                "loader": "dali",
                "model": "resnet50",
                "precision": "amp_bf16",
                "per_gpu_batch": 4,
                "world_size": 2,
                "num_nodes": 1,
            }
        ]
    )
    (row,) = step_stability(step_stability_runs(pd.DataFrame(rows)), per_run).to_dict("records")
    assert (row["framework"], row["world_size"]) == ("ddp", 2)
    assert row["step_ms_median"] == pytest.approx(1000) and row["step_ms_max"] == pytest.approx(2000)
    assert row["slow_steps_pct"] == pytest.approx(20)
    assert row["slow_time_pct"] == pytest.approx(100 * 2.0 / 12.0)  # 2 s beyond the median of 12 s in all


def test_rank_imbalance_by_hand():
    # run a: rank 1's forward is 4 ms slower, so rank 0 waits 4 ms longer in backward's all-reduce;
    # run b: one rank (nothing to compare); run c: 2 ranks within 0.5 ms
    rows = []
    for step in range(10):
        for run, rank, fwd, bwd in (
            ("a", 0, 0.026, 0.034),
            ("a", 1, 0.030, 0.030),
            ("b", 0, 0.026, 0.034),
            ("c", 0, 0.026, 0.030),
            ("c", 1, 0.0265, 0.030),
        ):
            rows.append(
                {
                    "run_id": run,
                    "step": step,
                    "rank": rank,
                    "warmup": False,
                    "samples": 4,
                    "data_s": 0.0,
                    "fwd_s": fwd,
                    "bwd_s": bwd,
                    "opt_s": 0.0004,
                    "step_s": 0.06,
                }
            )
    rows.append(
        {
            "run_id": "c",
            "step": -1,
            "rank": 1,
            "warmup": True,
            "samples": 4,
            "data_s": 0.0,
            "fwd_s": 9.0,
            "bwd_s": 9.0,
            "opt_s": 0.0,
            "step_s": 18.0,
        }
    )  # warm-up: not measured
    table = rank_imbalance(pd.DataFrame(rows))
    assert table[["run_id", "phase", "slowest_rank"]].values.tolist() == [["a", "fwd", 1], ["a", "bwd", 0]]
    assert table["gap_ms"].tolist() == pytest.approx([4.0, 4.0])
    assert table["fastest_ms"].tolist() == pytest.approx([26.0, 30.0])
