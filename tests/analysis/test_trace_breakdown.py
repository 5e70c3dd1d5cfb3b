"""The trace window's breakdown in the analysis: both denominators, timers against trace, the seed's layout
(trace.trace_breakdown_runs, trace.timers_vs_trace, report.seed_layout), computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.load import load_reference
from analysis.load.records import TRACE_COLUMNS
from analysis.trace import TRACE_RUNTIME, seed_layout, timers_vs_trace, trace_breakdown_runs

WINDOW = {
    "window_s": 0.1,
    "compute_s": 0.07,
    "conv_s": 0.04,
    "gemm_s": 0.01,
    "other_compute_s": 0.02,
    "memcpy_s": 0.005,
    "h2d_s": 0.005,
    "comm_total_s": 0.03,
    "comm_overlap_s": 0.02,
    "comm_exposed_s": 0.01,
    "idle_s": 0.015,
    "allreduce_s": 0.03,
    "allreduce_exposed_s": 0.01,
}


def traces() -> pd.DataFrame:
    rows = [
        {"run_id": "r", "rank": rank, "source": "sampled", "steps": 2, "first_step": 8, "last_step": 9, **WINDOW}
        for rank in (0, 1)
    ]
    return pd.DataFrame(rows, columns=TRACE_COLUMNS)


def steps() -> pd.DataFrame:
    rows = [
        {
            "run_id": "r",
            "rank": rank,
            "step": step,
            "warmup": step < 2,
            "profiled": step >= 7,
            "samples": 4,
            "step_s": 0.1,
            "data_s": 0.01,
            "fwd_s": 0.03,
            "bwd_s": 0.04,
            "opt_s": 0.005,
            "comm_s": 0.03,
            "comm_exposed_s": 0.01,
        }
        for rank in (0, 1)
        for step in range(10)
    ]
    return pd.DataFrame(rows)


def test_both_denominators_by_hand():
    runs = pd.DataFrame({"run_id": ["r"], "runtime_s": [2.0]})
    (row,) = trace_breakdown_runs(traces(), steps(), runs).to_dict("records")
    assert row["ranks_traced"] == 2 and row["trace_steps"] == 2 and row["trace_source"] == "sampled"
    # shares of the window's step time
    assert row["conv_pct"] == pytest.approx(40) and row["gemm_pct"] == pytest.approx(10)
    assert row["other_compute_pct"] == pytest.approx(20) and row["copies_pct"] == pytest.approx(5)
    assert row["allreduce_pct"] == pytest.approx(30) and row["allreduce_exposed_pct"] == pytest.approx(10)
    assert row["idle_pct"] == pytest.approx(15)
    assert (
        row["conv_pct"]
        + row["gemm_pct"]
        + row["other_compute_pct"]
        + row["copies_pct"]
        + row["comm_exposed_pct"]
        + row["idle_pct"]
    ) == pytest.approx(100)
    # shares of the runtime: each rank stepped 10 x 0.1 s of its 2 s runtime
    assert row["conv_runtime_pct"] == pytest.approx(20) and row["allreduce_exposed_runtime_pct"] == pytest.approx(5)
    assert row["compute_runtime_pct"] == pytest.approx(35) and row["data_runtime_pct"] == pytest.approx(5)
    assert row["startup_runtime_pct"] == pytest.approx(50)
    assert row["window_slowdown"] == pytest.approx(1.0)  # the window's steps took as long as the measured ones


def test_a_window_that_slowed_its_steps_says_so():
    slow = steps()
    slow.loc[slow["step"] >= 8, "step_s"] = 0.125  # the traced steps 8-9
    (row,) = trace_breakdown_runs(traces(), slow, pd.DataFrame({"run_id": ["r"]})).to_dict("records")
    assert row["window_slowdown"] == pytest.approx(1.25)


def test_no_runtime_no_runtime_shares():
    for runs in (pd.DataFrame({"run_id": ["r"]}), pd.DataFrame({"run_id": ["r"], "runtime_s": [0.5]})):
        (row,) = trace_breakdown_runs(traces(), steps(), runs).to_dict("records")
        assert row["conv_pct"] == pytest.approx(40)  # a runtime shorter than the steps is none
        assert all(pd.isna(row[c]) for c in TRACE_RUNTIME)


def test_timers_against_the_trace_of_the_same_steps():
    table = timers_vs_trace(traces(), steps())
    assert list(table["rank"]) == [0, 1]
    row = table.iloc[0]
    assert row["compute_timer_pct"] == pytest.approx(65) and row["compute_trace_pct"] == pytest.approx(75)
    assert row["comm_exposed_timer_pct"] == pytest.approx(10) and row["comm_exposed_trace_pct"] == pytest.approx(10)
    assert row["data+other/idle_timer_pct"] == pytest.approx(25) and row["data+other/idle_trace_pct"] == pytest.approx(
        15
    )
    assert row["comm_total_timer_pct"] == pytest.approx(30) and row["comm_total_trace_pct"] == pytest.approx(30)
    assert row["disagreement_pp"] == pytest.approx(10) and row["worst"] == "compute"


def test_the_seed_layout_beside_the_reference():
    traced = pd.DataFrame(
        {
            "framework": ["ddp", "horovod", "ddp"],
            "loader": ["dali", "dali", "native"],
            "model": ["resnet50"] * 3,
            "world_size": [4, 4, 2],
            "num_nodes": [1, 1, 1],
            "allreduce_exposed_runtime_pct": [10.0, 12.0, 3.0],
            "data_runtime_pct": [20.0, 21.0, 30.0],
            "conv_runtime_pct": [30.0, 29.0, 25.0],
        }
    )
    out = seed_layout(traced, load_reference("aach2023"))
    ddp4 = out[(out["framework"] == "ddp") & (out["gpus"] == 4)].iloc[0]
    assert (ddp4["allreduce_pct"], ddp4["data_pct"], ddp4["cudnn_pct"]) == (10.0, 20.0, 30.0)
    assert (ddp4["allreduce_pct_ref"], ddp4["data_pct_ref"], ddp4["compute_pct_ref"]) == (15.4, 22.0, 32.5)
    horovod = out[out["framework"] == "horovod"].iloc[0]
    assert pd.isna(horovod["allreduce_pct_ref"])  # the reference is PyTorch-DDP's
    assert pd.isna(out[out["gpus"] == 2].iloc[0]["data_pct_ref"])  # no reference cell at 2 GPUs
    assert "allreduce_pct_ref" not in seed_layout(traced, None)


def test_the_trace_bars_tell_cells_apart_and_keep_the_legend_clear_of_the_title():
    """Two cells that differ in precision only are two labelled bars, not one label twice (seen on the H200:
    bf16 and fp32 read alike), and the legend sits below the panels, where the title cannot overdraw it."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from analysis.palette import PAPER_RC
    from analysis.trace import TRACE_PARTS, trace_breakdown_bars

    base = {"framework": "ddp", "loader": "synthetic", "model": "resnet50", "world_size": 1, "num_nodes": 1}
    base |= {"per_gpu_batch": 256, "variant": "", "comm_exposed_pct": 0.0, "allreduce_exposed_pct": 0.0}
    base |= {column: 10.0 for _, *columns in TRACE_PARTS for column in columns if column}
    cells = pd.DataFrame([{**base, "precision": "amp_bf16"}, {**base, "precision": "fp32"}])
    with matplotlib.rc_context(PAPER_RC):
        fig = trace_breakdown_bars(cells)
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        fig.set_canvas(FigureCanvasAgg(fig))
        renderer = fig.canvas.get_renderer()
        legend = fig.legends[0].get_window_extent(renderer)
        title = fig._suptitle.get_window_extent(renderer)
    assert len(set(labels)) == 2 and "amp_bf16" in labels[0] and "fp32" in labels[1], labels
    assert legend.y1 < title.y0 and legend.y1 < fig.axes[0].get_window_extent(renderer).y0
