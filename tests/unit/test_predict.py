"""The scaling predictor's arithmetic (analysis/predict/) and gradient layout (benchmarks/gradients.py),
against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.predict import calibration as C
from analysis.predict import model as M
from analysis.predict import network as N
from analysis.predict import simulation as S
from benchmarks import gradients as G
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import framework_config


def parts(**kw) -> M.Parts:
    base = dict(fwd_s=0.010, bwd_s=0.020, opt_s=0.002, data_s=0.001, other_s=0.001, jitter_s=0.0, per_gpu_batch=64)
    return M.Parts(**{**base, **kw}, source="hand")


NET = N.Network(
    intra=N.Level(latency_s=10e-6, busbw_gb_s=100.0),
    inter=N.Level(latency_s=20e-6, busbw_gb_s=10.0),
    gpus_per_node=4,
)


def test_expected_maximum_of_normals_matches_known_values():
    assert M.expected_max_normal(1) == 0.0
    # exact: E[max of 2] = 1/sqrt(pi); of 3 = 3/(2 sqrt(pi)); tables: 4 -> 1.0294, 10 -> 1.5388, 100 -> 2.5076
    for n, exact in (
        (2, 1 / math.sqrt(math.pi)),
        (3, 1.5 / math.sqrt(math.pi)),
        (4, 1.0294),
        (10, 1.5388),
        (100, 2.5076),
    ):
        assert M.expected_max_normal(n) == pytest.approx(exact, rel=0.01)


def test_collective_cost_uses_the_bus_factor_and_the_level():
    # 4 ranks in a node: 2 * log2(4) = 4 latency steps + 2(3)/4 * 100 MB / 100 GB/s
    assert NET.collective_s("all_reduce", 1e8, 4) == pytest.approx(4 * 10e-6 + 1.5 * 1e8 / 100e9)
    # 8 ranks span two nodes: the inter-node level, 2 * 3 steps + 2(7)/8 * S / 10 GB/s
    assert NET.collective_s("all_reduce", 1e8, 8) == pytest.approx(6 * 20e-6 + 1.75 * 1e8 / 10e9)
    assert NET.collective_s("reduce_scatter", 1e8, 8) == pytest.approx(3 * 20e-6 + 0.875 * 1e8 / 10e9)
    assert NET.collective_s("all_reduce", 1e8, 1) == 0.0


def test_a_missing_level_is_a_one_line_error_naming_the_fix():
    net = N.Network(intra=NET.intra, inter=None, gpus_per_node=4)
    with pytest.raises(ConfigError, match=r"--gpus 8: no network level across nodes .* pass --commbench"):
        net.collective_s("all_reduce", 1e6, 8)


def test_fit_recovers_latency_and_bandwidth_from_exact_times():
    rows = [
        {
            "op": "all_reduce",
            "world_size": n,
            "size_bytes": s,
            "time_s": 2 * math.ceil(math.log2(n)) * 7e-6 + 2 * (n - 1) / n * s / 25e9,
        }
        for n in (2, 4)
        for s in (2**k for k in range(10, 28, 2))
    ]
    level = N.fit_level(pd.DataFrame(rows), source="exact")
    assert level.latency_s == pytest.approx(7e-6, rel=1e-6)
    assert level.busbw_gb_s == pytest.approx(25.0, rel=1e-6)


def test_fit_refuses_times_that_do_not_grow_with_size():
    rows = [{"op": "all_reduce", "world_size": 2, "size_bytes": s, "time_s": 1e-3} for s in (1024, 2048, 4096)]
    with pytest.raises(ConfigError, match="do not grow with the size"):
        N.fit_level(pd.DataFrame(rows), source="flat")


def test_measured_curves_are_used_between_their_sizes_and_the_model_outside():
    frame = pd.DataFrame(
        [
            {"op": "all_reduce", "world_size": 2, "size_bytes": 1e6, "time_s": 1e-3, "in_place": False},
            {"op": "all_reduce", "world_size": 2, "size_bytes": 4e6, "time_s": 4e-3, "in_place": False},
            {"op": "all_reduce", "world_size": 2, "size_bytes": 4e6, "time_s": 9.0, "in_place": True},  # ignored
        ]
    )
    net = N.Network(intra=NET.intra, inter=NET.inter, gpus_per_node=4, measured=N.curves(frame))
    assert net.collective_s("all_reduce", 1e6, 2) == pytest.approx(1e-3)
    assert net.collective_s("all_reduce", 2e6, 2) == pytest.approx(2e-3)  # log-log: proportional here
    assert net.collective_s("all_reduce", 8e6, 2) == pytest.approx(NET.collective_s("all_reduce", 8e6, 2))


def test_step_overlaps_messages_with_backward_and_exposes_the_rest():
    # backward 20 ms; a message ready at 50% that takes 4 ms and one at 100% that takes 3 ms
    net = N.Network(intra=N.Level(latency_s=0.0, busbw_gb_s=1.0), inter=None, gpus_per_node=8)
    plan = [
        M.Message(op="all_reduce", bytes=4e6, ready_fraction=0.5),  # 2(1)/2 * 4e6 / 1e9 = 4 ms
        M.Message(op="all_reduce", bytes=3e6, ready_fraction=1.0),  # 3 ms
    ]
    s = S.step(parts(), plan, net, 2)
    assert s["comm_s"] == pytest.approx(0.007)
    assert s["comm_exposed_s"] == pytest.approx(0.003)  # the first hides in backward, the last is exposed
    assert s["step_s"] == pytest.approx(0.001 + 0.032 + 0.001 + 0.003)
    # a late first message pushes the second: ready at 95% (19 ms) ends at 23, the second at 26
    late = [M.Message(op="all_reduce", bytes=4e6, ready_fraction=0.95), plan[1]]
    assert S.step(parts(), late, net, 2)["comm_exposed_s"] == pytest.approx(0.006)


def test_sync_grows_with_the_slowest_of_n_ranks():
    plan = [M.Message(op="all_reduce", bytes=1.0, ready_fraction=1.0)]
    s2, s16 = (S.step(parts(jitter_s=0.004), plan, NET, n)["sync_s"] for n in (2, 16))
    assert s2 == pytest.approx(0.004 * M.expected_max_normal(2))
    assert s16 == pytest.approx(0.004 * M.expected_max_normal(16))
    assert S.step(parts(jitter_s=0.004), plan, NET, 1)["sync_s"] == 0.0


def test_prediction_table_shares_sum_to_100_and_efficiency_is_against_one_gpu():
    plan = [M.Message(op="all_reduce", bytes=1e8, ready_fraction=1.0)]
    table = S.predict(parts(jitter_s=0.001), plan, NET, [1, 4, 8])
    shares = table[["allreduce_pct", "data_pct", "compute_pct", "other_pct"]].sum(axis=1)
    assert np.allclose(shares, 100.0)
    assert table.loc[0, "efficiency"] == pytest.approx(1.0)
    assert table.loc[2, "throughput"] == pytest.approx(8 * 64 / table.loc[2, "step_s"])
    assert list(table["nodes"]) == [1, 1, 2]
    assert table["allreduce_pct"].is_monotonic_increasing


def test_frameworks_send_what_they_send():
    buckets = [G.Bucket(10, 0.3), G.Bucket(20, 1.0)]
    ddp = M.messages({"name": "ddp"}, buckets, buffer_bytes=5)
    assert [(m.op, m.bytes, m.after_step) for m in ddp] == [
        ("all_reduce", 10, False),
        ("all_reduce", 20, False),
        ("broadcast", 5, True),
    ]
    zero0 = M.messages({"name": "deepspeed", "zero_stage": 0}, buckets)
    assert all(m.ready_fraction == 1.0 for m in zero0)
    zero2 = M.messages({"name": "deepspeed", "zero_stage": 2, "overlap_comm": True}, buckets)
    assert [m.op for m in zero2] == ["reduce_scatter", "reduce_scatter", "all_gather"]
    assert zero2[-1].bytes == 30 and zero2[-1].after_step
    assert M.messages({"name": "horovod", "cycle_time_ms": 2.0}, buckets)[0].extra_latency_s == pytest.approx(1e-3)
    with pytest.raises(ConfigError, match="framework=dp: predict models ddp .* DataParallel's one process"):
        M.messages({"name": "dp"}, buckets)


def test_sharded_modes_send_what_they_send():
    buckets = [G.Bucket(10, 0.3), G.Bucket(20, 1.0)]
    # ZeroRedundancyOptimizer: DDP's all-reduces, then every parameter reaches every rank after the step
    zero_opt = M.messages({"name": "ddp", "zero_optimizer": True}, buckets, param_bytes=30)
    assert [(m.op, m.bytes, m.after_step) for m in zero_opt] == [
        ("all_reduce", 10, False),
        ("all_reduce", 20, False),
        ("all_gather", 30, True),
    ]
    # ZeRO-3: each reduce bucket is a unit, gathered before its forward and again before its backward
    zero3 = M.messages({"name": "deepspeed", "zero_stage": 3}, buckets)
    forward = [(m.op, m.bytes, m.ready_fraction, m.needed_fraction) for m in zero3 if m.in_forward]
    # forward runs the units in reverse: the one whose backward ends last (at 1.0) computes first
    assert forward == [("all_gather", 20, 0.0, 0.0), ("all_gather", 10, 0.0, pytest.approx(0.7))]
    backward = [(m.op, m.bytes, m.ready_fraction, m.needed_fraction) for m in zero3 if not m.in_forward]
    assert backward == [
        ("all_gather", 10, 0.0, 0.0),
        ("all_gather", 20, 0.0, 0.3),
        ("reduce_scatter", 10, 0.3, None),
        ("reduce_scatter", 20, 1.0, None),
    ]
    # ZeRO-3 with its modules: their partitioned parameters gathered per module, the gradients reduce-scattered in
    # their buckets, the parameters it keeps whole gathered once after the step
    modules = [M.Unit(gather_bytes=16, reduce_bytes=0, start=0.5, end=1.0)]
    zero3 = M.messages({"name": "deepspeed", "zero_stage": 3}, buckets, units=modules, persistent_bytes=14)
    assert [(m.op, m.bytes, m.in_forward, m.after_step) for m in zero3] == [
        ("all_gather", 16, True, False),
        ("all_gather", 16, False, False),
        ("reduce_scatter", 10, False, False),
        ("reduce_scatter", 20, False, False),
        ("all_gather", 14, False, True),
    ]
    # FSDP2: the root's parameters stay gathered from forward into backward
    units = [M.Unit(gather_bytes=5, reduce_bytes=10, start=0.0, end=0.6), M.Unit(gather_bytes=8, reduce_bytes=16,
             start=0.0, end=1.0, root=True)]  # fmt: skip
    fsdp = M.messages({"name": "fsdp"}, [], units=units)
    assert sum(m.op == "all_gather" and not m.in_forward for m in fsdp) == 1
    kept = M.messages({"name": "fsdp", "reshard_after_forward": False}, [], units=units)
    assert [m.op for m in kept if not m.in_forward] == ["reduce_scatter", "reduce_scatter"]


def test_a_gather_the_forward_waits_for_stalls_it():
    units = [M.Unit(gather_bytes=1e8, reduce_bytes=1e8, start=0.0, end=0.5), M.Unit(gather_bytes=1e8,
             reduce_bytes=1e8, start=0.5, end=1.0)]  # fmt: skip
    plan = M.messages({"name": "fsdp", "reshard_after_forward": False}, [], units=units)
    gather_s = NET.collective_s("all_gather", 1e8, 2)  # 0.5 ms at 100 GB/s
    step = S.step(parts(), plan, NET, 2)
    # forward (10 ms) waits for the first unit's gather; the second's is prefetched while the first computes
    fast = N.Network(intra=N.Level(latency_s=0.0, busbw_gb_s=1e6), inter=None, gpus_per_node=4)
    assert S.step(parts(), plan, fast, 2)["comm_exposed_s"] == pytest.approx(0.0, abs=1e-6)
    assert step["comm_exposed_s"] >= gather_s
    slow = N.Network(intra=N.Level(latency_s=0.0, busbw_gb_s=1.0), inter=None, gpus_per_node=4)  # 50 ms a gather
    stalled = S.step(parts(), plan, slow, 2)
    # the first gather stalls forward 50 ms; the second, sent right after it, is 5 ms late at the halfway point
    # of forward (issued at 0, done at 100 ms, needed at 50 + 5 ms); backward's reduce-scatters run past its end
    assert stalled["comm_exposed_s"] > 0.1


def test_fsdp_units_follow_the_adapters_groups():
    from analysis.predict.command import _shard_owners

    model = {"arch": "resnet", "depth": 18, "num_classes": 10}
    layout = G.layout(model, image_size=32)
    # children: conv1, bn1, layer1-4, fc (the root keeps nothing); blocks: ResNet's 8 blocks and the root with
    # the stem and the head; root: one unit
    for unit, count, with_root in (("children", 7, False), ("blocks", 9, True), ("root", 1, True)):
        owner, root = _shard_owners(model, unit, cache={})
        units = M.units_from_groups(layout.gradients, owner, root, gather_scale=0.5, reduce_scale=1.0)
        assert (len(units), sum(u.root for u in units)) == (count, int(with_root))
        total = sum(g.bytes for g in layout.gradients)
        assert sum(u.reduce_bytes for u in units) == total and sum(u.gather_bytes for u in units) == total / 2
        assert [u.end for u in units] == sorted(u.end for u in units)
        assert units[-1].root == with_root  # the stem's backward ends last


def test_reference_calibration_reproduces_the_first_point_exactly():
    ref = pd.DataFrame(
        {
            "gpus": [4, 8, 16],
            "allreduce_pct": [15.4, 19.0, 21.0],
            "data_pct": [22.0, 21.4, 20.95],
            "compute_pct": [32.5, 31.75, 30.7],
        }
    )
    plan = [M.Message(op="all_reduce", bytes=1e8, ready_fraction=0.5)]
    tuned, n0 = S.calibrate_to_reference(parts(), plan, NET, ref)
    assert n0 == 4
    table = S.predict(tuned, plan, NET, [4, 8, 16])
    first = table.iloc[0]
    assert (first["allreduce_pct"], first["data_pct"], first["compute_pct"]) == pytest.approx((15.4, 22.0, 32.5))
    compared = S.compare_reference(table, ref, calibrated_at=n0)
    assert list(compared["held_out"]) == [False, True, True]
    assert compared.loc[0, "allreduce_err_pp"] == pytest.approx(0.0, abs=1e-9)


def test_parts_take_the_exposed_wait_out_of_backward():
    steps = pd.DataFrame(
        {
            "rank": [0, 0, 1, 1],
            "step": [0, 1, 0, 1],
            "warmup": [False] * 4,
            "profiled": [False] * 4,
            "data_s": [0.001] * 4,
            "fwd_s": [0.01] * 4,
            "bwd_s": [0.025, 0.027, 0.025, 0.027],
            "opt_s": [0.002] * 4,
            "comm_exposed_s": [0.005, 0.007, 0.005, 0.007],
            "step_s": [0.040, 0.042, 0.040, 0.042],
        }
    )
    p = C.parts_from_steps(steps, per_gpu_batch=8, source="t")
    assert p.bwd_s == pytest.approx(0.020)
    assert p.other_s == pytest.approx(0.002)
    assert p.jitter_s == pytest.approx(0.0)  # step minus exposed is 35 ms on every step


# --- gradients ------------------------------------------------------------------------------------


def test_buckets_close_at_their_cap_and_the_first_cap_applies_once():
    grads = [G.Gradient(f"g{i}", 400, (i + 1) / 10) for i in range(10)]
    out = G.buckets(grads, cap_bytes=1000, first_cap_bytes=500)
    assert [b.bytes for b in out] == [800, 1200, 1200, 800]
    assert [b.ready_fraction for b in out] == [0.2, 0.5, 0.8, 1.0]


@pytest.fixture(scope="module")
def resnet50():
    return G.layout({"arch": "resnet", "depth": 50, "num_classes": 1000, "batch_norm": True}, image_size=224)


def test_resnet50_layout_holds_every_parameter_in_backward_order(resnet50):
    grads = resnet50.gradients
    assert sum(g.bytes for g in grads) == 4 * 25_557_032  # torchvision's resnet50 parameters, fp32
    assert grads[0].name.startswith("fc.") and grads[-1].name == "conv1.weight"
    fractions = [g.ready_fraction for g in grads]
    assert fractions == sorted(fractions) and 0 < fractions[0] and fractions[-1] == 1.0
    assert resnet50.buffer_bytes > 0  # BatchNorm running statistics


def test_ddp_buckets_of_resnet50(resnet50):
    out = framework_config({"name": "ddp", "bucket_cap_mb": 25.0}).gradient_messages(resnet50.gradients, amp=False)
    assert sum(b.bytes for b in out) == 4 * 25_557_032
    assert len(out) == 5 and out[-1].ready_fraction == 1.0
    assert all(b.bytes >= 25 * 2**20 for b in out[1:-1])
    horovod = framework_config({"name": "horovod", "fusion_threshold_mb": 64.0})
    fused = horovod.gradient_messages(resnet50.gradients, amp=False)
    assert len(fused) == 2


def test_jitter_is_the_spread_between_ranks_at_a_step_not_the_machine_drift():
    # every step is 10 ms slower than the one before on both ranks (the machine), rank 1 always 2 ms behind
    n = 6
    steps = pd.DataFrame(
        {
            "rank": [0] * n + [1] * n,
            "step": list(range(n)) * 2,
            "warmup": [False] * 2 * n,
            "step_s": [0.05 + 0.01 * i for i in range(n)] + [0.052 + 0.01 * i for i in range(n)],
        }
    )
    # deviations from the step's mean: -1 and +1 ms; 1 degree of freedom per step
    assert C.parts_from_steps(steps, per_gpu_batch=8, source="t").jitter_s == pytest.approx(math.sqrt(2) * 1e-3)
    one = steps[steps["rank"] == 0]  # one rank: the spread over steps, drift included
    assert C.parts_from_steps(one, per_gpu_batch=8, source="t").jitter_s == pytest.approx(one["step_s"].std())


def test_models_without_an_image_batch_complete_their_gradients_in_reverse_parameter_order(transformers):
    out = G.layout({"arch": "bert", "size": "tiny", "num_classes": 2, "seq_len": 32}, image_size=224)
    fractions = [g.ready_fraction for g in out.gradients]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    assert out.gradients[0].name.startswith("qa_outputs")  # the head is the last layer, so its gradient comes first


# --- the data path ---------------------------------------------------------------------------------


def test_the_rank_waits_for_its_loader_only_where_the_loader_needs_longer_than_the_rest_of_the_step():
    # the loader: 1,600 img/s per rank = 40 ms per batch of 64; the rest on one GPU: 32 + 1 + 1 = 34 ms
    fed = parts(loader_img_s=1600.0)
    one = S.step(fed, [], NET, 1)
    assert one["loader_wait_s"] == pytest.approx(0.006)
    assert (one["data_s"], one["step_s"]) == pytest.approx((0.007, 0.040))
    # on 2 GPUs a 10 MB all_reduce after backward (factor 1 at n=2, 1 GB/s) exposes 10 ms: the rest is 44 ms
    net = N.Network(intra=N.Level(latency_s=0.0, busbw_gb_s=1.0), inter=None, gpus_per_node=8)
    plan = [M.Message(op="all_reduce", bytes=10e6, ready_fraction=1.0)]
    two = S.step(fed, plan, net, 2)
    assert two["loader_wait_s"] == 0.0 and two["data_s"] == pytest.approx(0.001)
    assert two["step_s"] == pytest.approx(0.044)
    row = S.predict(fed, plan, net, [2]).iloc[0]
    assert row["loader_node_img_s"] == pytest.approx(3200.0)  # 2 GPUs of the node x 1,600
    assert row["demand_node_img_s"] == pytest.approx(2 * 64 / 0.044)
    # without a capacity (inf) the data time is the handover at every size
    assert S.step(parts(), [], NET, 1)["data_s"] == pytest.approx(0.001)


def test_sync_takes_the_compute_and_the_data_time_spread_together():
    s = S.step(parts(jitter_s=0.003, data_jitter_s=0.004), [], NET, 16)
    assert s["sync_s"] == pytest.approx(0.005 * M.expected_max_normal(16))  # hypot(3, 4) = 5 ms
    assert s["comm_exposed_s"] == pytest.approx(s["sync_s"])  # counted as communication, as a trace shows it


def test_a_calibration_run_gives_its_data_time_back_at_its_own_size():
    steps = pd.DataFrame(
        {
            "rank": [0, 0],
            "step": [0, 1],
            "warmup": [False, False],
            "data_s": [0.010, 0.014],
            "fwd_s": [0.01, 0.01],
            "bwd_s": [0.02, 0.02],
            "opt_s": [0.01, 0.01],
            "step_s": [0.050, 0.054],
        }
    )
    fed = C.parts_from_steps(steps, per_gpu_batch=8, source="t", loader="native")
    assert fed.loader_img_s == pytest.approx(8 / 0.052)  # a batch per mean step at least
    assert fed.data_jitter_s == pytest.approx(0.004 / math.sqrt(2))  # std of 10 and 14 ms
    assert fed.jitter_s == pytest.approx(0.0)  # step minus data is 40 ms on both steps
    one = S.step(fed, [], NET, 1)
    assert (one["data_s"], one["step_s"]) == pytest.approx((0.012, 0.052))
    synthetic = C.parts_from_steps(steps, per_gpu_batch=8, source="t", loader="synthetic")
    assert math.isinf(synthetic.loader_img_s) and synthetic.data_s == pytest.approx(0.012)


def test_loader_capacity_is_loaderbench_s_row_at_the_predicted_worker_count():
    rows = pd.DataFrame(
        {
            "case": ["cpu_decode", "native", "native", "dali"],
            "workers": [1, 2, 11, 11],
            "img_s": [300.0, 500.0, 1500.0, 12000.0],
        }
    )
    assert C.loader_capacity(rows, case="native", workers=11, source="f")["img_s"] == 1500.0
    with pytest.raises(ConfigError, match=r"no native row at 8 workers/threads, the prediction's \(it has 2, 11\)"):
        C.loader_capacity(rows, case="native", workers=8, source="f")
    with pytest.raises(ConfigError, match=r"no native_gpu row \(it has cpu_decode, dali, native\)"):
        C.loader_capacity(rows, case="native_gpu", workers=11, source="f")


def test_a_loader_that_keeps_up_steadily_leaves_the_closed_form():
    """Batches made faster than asked, at steady intervals: no rank waits for data, and the wait for the
    slowest rank is the compute's spread x e(n), as without a loader."""
    closed = parts(jitter_s=0.003)
    steady = closed.with_loader(loader="native", img_s=6400.0, source="t", intervals_s=[0.01] * 4, queue=4)
    for n in (1, 4, 64, 1024):
        simulated, formula = S.step(steady, [], NET, n), S.step(closed, [], NET, n)
        assert simulated["loader_wait_s"] == 0.0
        assert simulated["sync_s"] == pytest.approx(formula["sync_s"], rel=0.03, abs=1e-5)
        assert simulated["step_s"] == pytest.approx(formula["step_s"], rel=0.005)
    assert S.step(steady, [], NET, 64) == S.step(steady, [], NET, 64)  # seeded: the same figures every time


def test_a_slow_loaders_wait_turns_into_waiting_for_the_slowest_rank_as_ranks_grow():
    """A loader slower than the step paces it: one rank waits for its batch (data), many ranks wait for the
    one whose batch came last (sync, communication), and the step stays the loader's interval."""
    slow = parts(jitter_s=0.003).with_loader(
        loader="native", img_s=64 / 0.045, source="t", intervals_s=[0.045], queue=8
    )
    one, many = S.step(slow, [], NET, 1), S.step(slow, [], NET, 1024)
    assert one["step_s"] == pytest.approx(0.045, rel=1e-3) and many["step_s"] == pytest.approx(0.045, rel=1e-3)
    assert one["loader_wait_s"] == pytest.approx(0.045 - 0.034, rel=0.01) and one["sync_s"] == 0.0
    assert many["loader_wait_s"] < 0.2 * one["loader_wait_s"] and many["sync_s"] > 0.008


def test_a_loaders_spread_makes_ranks_wait_for_each_other_even_where_it_keeps_up_on_average():
    """Mean interval 29 ms under a 34 ms step, with one batch in four taking 100 ms: the queue absorbs most,
    not all; the wait for the slowest rank grows with the ranks beyond the compute's own."""
    closed = parts(jitter_s=0.003)
    tail = closed.with_loader(
        loader="native", img_s=64 / 0.02875, source="t", intervals_s=[0.005, 0.005, 0.005, 0.1], queue=8
    )
    syncs = [S.step(tail, [], NET, n)["sync_s"] - S.step(closed, [], NET, n)["sync_s"] for n in (4, 64, 1024)]
    assert 0.0 < syncs[0] < syncs[1] < syncs[2]


def test_fsdp_bytes_follow_the_adapters_precision_policy():
    """The predictor's gather and reduce bytes come from the same config methods the adapter's policy does."""
    import torch

    from benchmarks.frameworks.configs import FSDPConfig, FSDPMixedPrecision, FSDPReduceDtype
    from benchmarks.frameworks.fsdp import mixed_precision_policy

    for mixed in FSDPMixedPrecision:
        for reduce in FSDPReduceDtype:
            config = FSDPConfig(mixed_precision=mixed, reduce_dtype=reduce)
            for amp_dtype in (None, torch.bfloat16):
                policy, amp = mixed_precision_policy(config, amp_dtype), amp_dtype is not None
                assert (policy.param_dtype == torch.bfloat16) == config.gathers_half(amp=amp)
                assert (policy.reduce_dtype == torch.bfloat16) == config.reduces_half(amp=amp)


def test_the_loaders_figure_draws_each_loaders_study_rows_once_and_every_prediction():
    from analysis.predict.figures import loaders_vs_reference

    def compared(pred: float) -> pd.DataFrame:
        return pd.DataFrame(
            {"gpus": [4, 8], "allreduce_pct_ref": [20.0, 30.0], "allreduce_pct_pred": [pred, pred + 5]}
        ).assign(allreduce_err_pp=lambda t: t["allreduce_pct_pred"] - t["allreduce_pct_ref"])

    figure = loaders_vs_reference(
        {"dali": compared(15.0), "native": compared(18.0), "native, 4 workers": compared(40.0)},
        {"dali": "dali", "native": "native", "native, 4 workers": "native"},
    )
    share, error = figure.axes[:2]
    lines = [line.get_label() for line in share.get_lines()]
    assert lines == [
        "study, dali",
        "predicted, dali",
        "study, native",
        "predicted, native",
        "predicted, native, 4 workers",
    ]
    assert len(error.patches) == 6  # a bar per prediction and GPU count


def test_a_run_that_waited_for_its_loader_shows_the_loaders_pace_in_its_batches_arrivals():
    # one rank, steps of 50 ms of which 30 ms wait for data: batches arrive every 50 ms; a gap (a warm-up or a
    # profiled step left out) is no interval
    steps = pd.DataFrame(
        {
            "rank": 0,
            "step": [5, 6, 7, 9, 10],
            "step_s": [0.05, 0.05, 0.06, 0.05, 0.05],
            "data_s": [0.03, 0.03, 0.04, 0.03, 0.03],
        }
    )
    assert C.arrival_intervals(steps) == pytest.approx((0.05, 0.06, 0.05))
    assert C.loader_bound(steps)
    assert not C.loader_bound(steps.assign(data_s=0.001))  # a handover, not a wait


def test_a_loader_bound_calibration_run_gives_its_own_throughput_back():
    """Calibrated from a run that waited for its loader, the prediction at the run's own size is the run."""
    rng = np.random.default_rng(0)
    data = 0.030 + 0.01 * rng.random(200)
    steps = pd.DataFrame(
        {
            "rank": 0,
            "step": range(200),
            "warmup": False,
            "data_s": data,
            "fwd_s": 0.01,
            "bwd_s": 0.02,
            "opt_s": 0.002,
            "step_s": data + 0.032,
        }
    )
    fed = C.parts_from_steps(steps, per_gpu_batch=8, source="t", loader="native")
    paced = fed.with_loader(
        loader="native",
        img_s=8 / steps["step_s"].mean(),
        source="t",
        intervals_s=C.arrival_intervals(steps),
        makers=2,
        queue=4,
    )
    assert S.step(paced, [], NET, 1)["step_s"] == pytest.approx(steps["step_s"].mean(), rel=0.02)


def test_zero3_keeps_small_parameters_whole_as_deepspeed_does():
    from benchmarks.frameworks.configs import DeepSpeedConfig

    three = DeepSpeedConfig(zero_stage=3)
    assert three.zero3_persists(100_000) and not three.zero3_persists(100_001)
    assert not DeepSpeedConfig(zero_stage=2).zero3_persists(10)  # only ZeRO-3 partitions parameters
    zero = pytest.importorskip("deepspeed.runtime.zero.config")
    # the adapter leaves DeepSpeed's threshold at its default, which the model restates
    assert zero.DeepSpeedZeroConfig().param_persistence_threshold == DeepSpeedConfig.ZERO3_PERSISTENCE_ELEMENTS


def test_a_dataloaders_workers_make_batches_in_turn_and_a_dali_pipeline_one_at_a_time():
    from benchmarks.loaders.configs import batch_makers

    assert [batch_makers({"name": n}, workers=11) for n in ("native", "native_gpu", "dali", "synthetic")] == [
        11,
        11,
        1,
        1,
    ]
    assert batch_makers({"name": "native"}, workers=0) == 1  # loading in the training process: one at a time
