"""Kernel classification and overlap: a recorded CPU/gloo trace (with its timer logs) and a small GPU-shaped trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.breakdown import compare, disagreement_pp, read_step_records, run_breakdown, timer_breakdown
from benchmarks.tracereduce import classify, read_trace, step_windows, trace_breakdown

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "traces" / "ddp-gloo-g2"


def kernel(name: str, ts: float, dur: float, cat: str = "kernel") -> dict:
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 0, "tid": 7}


def gpu_trace() -> dict:
    """Two steps of 100 us on the device: compute, an NCCL kernel partly hidden, a copy, idle gaps."""
    return {
        "traceEvents": [
            {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#4", "ts": 0, "dur": 100},
            {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#5", "ts": 100, "dur": 100},
            {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 0, "dur": 300},  # host op: ignored on GPU
            kernel("sm90_xmma_fprop", 0, 50),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 40, 30),  # 10 overlapped, 20 exposed
            kernel("Memcpy HtoD (Pageable -> Device)", 70, 10, cat="gpu_memcpy"),
            kernel("sm90_xmma_dgrad", 100, 60),
            kernel("Memset (Device)", 150, 20, cat="gpu_memset"),  # 10 under compute, 10 not
            kernel("ncclKernel_AllReduce", 190, 10),  # exposed
        ]
    }


def test_classification_of_device_events():
    assert classify(kernel("ncclDevKernel_AllReduce", 0, 1), device_trace=True) == "communication"
    assert classify(kernel("volta_sgemm", 0, 1), device_trace=True) == "compute"
    assert classify(kernel("Memcpy DtoH", 0, 1, cat="gpu_memcpy"), device_trace=True) == "memcpy"
    assert classify(kernel("Memset", 0, 1, cat="gpu_memset"), device_trace=True) == "memset"
    assert classify({"ph": "X", "cat": "cpu_op", "name": "aten::mm"}, device_trace=True) is None


def test_classification_of_host_events():
    assert (
        classify({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce"}, device_trace=False)
        == "communication"
    )
    assert classify({"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_"}, device_trace=False) == "communication"
    assert classify({"ph": "X", "cat": "cpu_op", "name": "aten::convolution"}, device_trace=False) == "compute"
    assert classify({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3"}, device_trace=False) is None
    assert classify({"ph": "s", "cat": "fwdbwd", "name": "fwdbwd"}, device_trace=False) is None


def test_gpu_trace_overlap_by_hand():
    b = trace_breakdown(gpu_trace())
    us = 1e-6
    assert b.steps == [4, 5]
    assert b.window_s == pytest.approx(200 * us)
    assert b.compute_s == pytest.approx(110 * us)
    assert b.memcpy_s == pytest.approx(20 * us)  # the copy + the memset's uncovered half
    assert b.comm_total_s == pytest.approx(40 * us)
    assert b.comm_overlap_s == pytest.approx(10 * us)
    assert b.comm_exposed_s == pytest.approx(30 * us)
    assert b.idle_s == pytest.approx(40 * us)  # 80-100, 170-190
    shares = b.shares()
    assert shares["compute"] + shares["memcpy"] + shares["comm_exposed"] + shares["idle"] == pytest.approx(1.0)


def test_one_step_of_the_window():
    b = trace_breakdown(gpu_trace(), steps=[5])
    assert b.window_s == pytest.approx(100e-6) and b.comm_exposed_s == pytest.approx(10e-6)
    with pytest.raises(ValueError, match="no ProfilerStep window"):
        trace_breakdown(gpu_trace(), steps=[9])


def test_recorded_cpu_trace_classes_and_windows():
    trace = read_trace(GOLDEN / "trace" / "rank0.pt.trace.json.gz")
    assert sorted(step_windows(trace)) == [3, 4, 5, 6]
    kinds = {classify(e, device_trace=False) for e in trace["traceEvents"]}
    assert {"compute", "communication"} <= kinds
    b = trace_breakdown(trace)
    assert 0 < b.comm_overlap_s <= b.comm_total_s
    assert b.comm_exposed_s > 0 and b.idle_s >= 0
    assert b.compute_s + b.memcpy_s + b.comm_exposed_s + b.idle_s == pytest.approx(b.window_s)


@pytest.mark.parametrize("rank", [0, 1])
def test_timers_and_trace_of_the_same_run_agree_within_5_points(rank):
    timer, trace, pairs = run_breakdown(GOLDEN, rank)
    assert timer.steps == trace.steps == [3, 4, 5, 6]
    assert set(pairs) == {"compute", "comm_exposed", "data+other/idle", "comm_total"}
    assert disagreement_pp(pairs) <= 5.0, pairs
    # and the same through the separate pieces
    records = read_step_records(GOLDEN / f"rank{rank}.jsonl")
    assert compare(timer_breakdown(records, steps=trace.steps), trace) == pairs


def fine_gpu_trace() -> dict:
    """One 100 us step: conv, GEMM, other compute, an H2D copy, an all-reduce partly hidden, an all-gather."""
    return {
        "traceEvents": [
            {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#7", "ts": 0, "dur": 100},
            kernel("Memcpy HtoD (Pinned -> Device)", 0, 10, cat="gpu_memcpy"),  # the batch: h2d
            kernel("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", 10, 20),  # conv, not GEMM
            kernel("nchwToNhwcKernel", 30, 5),  # cuDNN's layout transform: conv
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 35, 10),  # GEMM
            kernel("void at::native::vectorized_elementwise_kernel<4, ...>", 45, 15),  # other compute
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50, 30),  # 10 hidden (50-60), 20 exposed
            kernel("ncclDevKernel_AllGather_RING_LL", 85, 5),  # exposed
            kernel("Memcpy DtoD (Device -> Device)", 92, 4, cat="gpu_memcpy"),  # a copy, not h2d
        ]
    }


def test_fine_classes_of_a_gpu_trace():
    from benchmarks.tracereduce import collective_name, compute_kind

    assert compute_kind("sm80_xmma_wgrad_implicit_gemm_indexed_f16f16") == "conv"
    assert compute_kind("cudnn::bn_fw_tr_1C11_kernel_NCHW") == "other_compute"  # cuDNN, but no convolution
    assert compute_kind("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn") == "gemm"
    assert compute_kind("cutlass::Kernel2<cutlass_80_tensorop_s1688gemm>") == "gemm"
    # names seen on an H200 (ResNet-50, bf16, channels_last)
    assert (
        compute_kind(
            "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc>"
        )
        == "conv"
    )
    assert compute_kind("sm90_xmma_dgrad_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64") == "conv"
    assert compute_kind("void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, true>") == "conv"
    assert compute_kind("nvjet_sm90_tst_128x128_64x6_1x2_h_bz_splitK_NTT") == "gemm"
    assert compute_kind("void at::native::batch_norm_collect_statistics_channels_last_kernel<>") == "other_compute"
    assert compute_kind("void at::native::batch_norm_collect_statistics_kernel") == "other_compute"
    assert [
        collective_name(n)
        for n in (
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL",
            "ncclKernel_Broadcast_RING_LL",
            "ncclDevKernel_SendRecv",
            "gloo:all_reduce",
            "c10d::allgather_",
        )
    ] == ["reducescatter", "broadcast", "sendrecv", "allreduce", "allgather"]
    b = trace_breakdown(fine_gpu_trace())
    us = pytest.approx
    assert b.conv_s == us(25e-6) and b.gemm_s == us(10e-6) and b.other_compute_s == us(15e-6)
    assert b.conv_s + b.gemm_s + b.other_compute_s == us(b.compute_s)
    assert b.h2d_s == us(10e-6) and b.memcpy_s == us(14e-6)
    assert b.collectives_s == {"allgather": us(5e-6), "allreduce": us(30e-6)}
    assert b.collectives_exposed_s == {"allgather": us(5e-6), "allreduce": us(20e-6)}
    assert b.allreduce_s == us(30e-6) and b.allreduce_exposed_s == us(20e-6)
    assert b.comm_exposed_s == us(25e-6) and b.idle_s == us(100e-6 - 50e-6 - 14e-6 - 25e-6)
    shares = b.shares()
    assert shares["compute"] + shares["memcpy"] + shares["comm_exposed"] + shares["idle"] == us(1.0)
    assert json.loads(json.dumps(b.record()))["collectives_s"]["allreduce"] == us(30e-6)


def test_a_device_only_trace_takes_its_steps_from_the_schedule():
    """The sampled window on a GPU records device activity only: no ProfilerStep marks, so the caller
    names the steps and the window is the device's work from its first event to its last."""
    trace = {
        "traceEvents": [e for e in gpu_trace()["traceEvents"] if e["cat"] not in ("gpu_user_annotation", "cpu_op")]
    }
    b = trace_breakdown(trace, steps=range(4, 6))
    assert b.steps == [4, 5]
    assert b.window_s == pytest.approx(200e-6)  # 0 .. 200: the first kernel to the last
    assert b.comm_exposed_s == pytest.approx(30e-6) and b.idle_s == pytest.approx(40e-6)
    with pytest.raises(ValueError, match="no ProfilerStep window"):
        trace_breakdown(trace)  # without the schedule's steps there is no window
