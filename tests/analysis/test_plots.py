"""The analyses' figures: every figure renders and holds the expected series (inspected on the Axes)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from analysis.cells import cells, run_throughput
from analysis.commbench import commbench_curves
from analysis.figures import IDEAL_LABEL, readable_tick
from analysis.load import load_reference
from analysis.palette import framework_color
from analysis.reference_overlay import reference_breakdown, reference_comparison
from analysis.scaling import dali_vs_native, efficiency_vs_gpus, framework_by_depth, scaling, throughput_vs_gpus
from analysis.stability import SLOW_STEP_FACTOR, jittery_runs, step_stability_runs, step_timeline
from analysis.stash import stash_bars
from analysis.telemetry import telemetry_timeline
from analysis.time_shares import breakdown, breakdown_bars, breakdown_cells


@pytest.fixture
def tables(campaign):
    per_run = run_throughput(campaign.steps, campaign.counted)
    table = cells(per_run)
    return {
        "per_run": per_run,
        "cells": table,
        "scaled": scaling(table),
        "shares": breakdown_cells(breakdown(campaign.steps), per_run),
    }


def _render(fig) -> None:
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def _labels(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


def test_throughput_vs_gpus_has_a_curve_per_framework_and_loader_and_ideal(tables):
    fig = throughput_vs_gpus(tables["cells"])
    _render(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = _labels(ax)
    assert {"PyTorch-DDP, native", "PyTorch-DDP, DALI", "Horovod, native", "Horovod, DALI", IDEAL_LABEL} <= set(labels)
    assert labels.count(IDEAL_LABEL) == 1  # the ideal is labelled once
    ddp = next(line for line in ax.get_lines() if line.get_label() == "PyTorch-DDP, native")
    assert list(ddp.get_xdata()) == [1, 2, 4]
    curves = [
        line for line in ax.get_lines() if not line.get_label().startswith("_") and line.get_label() != IDEAL_LABEL
    ]
    # one colour per curve (before: a framework's curves shared one, and the ideal lines took it too)
    assert len({line.get_color() for line in curves}) == len(curves)
    assert curves[0].get_color() == framework_color("ddp")
    ideals = [line for line in ax.get_lines() if line.get_label() == "_ideal"]
    for curve in curves:  # each curve's ideal: dashed, in its colour, from its first point
        x, y = curve.get_xdata(), curve.get_ydata()
        if len(x) < 2:
            continue
        ideal = next(i for i in ideals if i.get_color() == curve.get_color())
        assert ideal.get_linestyle() == "--" and ideal.get_ydata()[0] == pytest.approx(y[0])


def test_a_narrow_log_axis_labels_each_tick_with_its_own_value(tables):
    """One curve of 3.2 img/s on 1 GPU and 5.3 on 2 (its ideal line ends at 6.4): under a decade, the ticks
    read 3.5, 4, 4.5, ..., never 4, 4, 5, 5 (whole numbers rounded from halves)."""
    cells = tables["cells"]
    first = cells.iloc[0]
    rows = cells[
        (cells["model"] == first["model"])
        & (cells["framework"] == first["framework"])
        & (cells["loader"] == first["loader"])
        & cells["world_size"].isin([1, 2])
    ].drop(columns=["throughput_img_s_ci_low", "throughput_img_s_ci_high"], errors="ignore")
    rows = rows.drop_duplicates("world_size").sort_values("world_size").assign(throughput_img_s=[3.2, 5.3])
    fig = throughput_vs_gpus(rows)
    _render(fig)
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    ticks = [(t.get_position()[1], t.get_text()) for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]
    labels = [text for _, text in ticks]
    assert len(ticks) >= 3 and len(set(labels)) == len(labels), ticks
    assert all(float(text) == pytest.approx(value, rel=0.01) for value, text in ticks), ticks
    assert readable_tick(1250.0) == "1,250" and readable_tick(0.25) == "0.25"


def test_breakdown_draws_every_cell_of_a_gpu_count(tables):
    """Two cells at one GPU count (another batch) are two bars, each lettered (1a, 1b) and what tells it
    apart said once in the legend (before: the variants stood under the bars and overprinted)."""
    shares = tables["shares"]
    model = sorted(shares["model"].unique())[0]
    one = shares[shares["model"] == model]
    framework, loader = one.iloc[0]["framework"], one.iloc[0]["loader"]
    panel = one[(one["framework"] == framework) & (one["loader"] == loader)]
    other = panel.iloc[[0]].assign(variant="run.per_gpu_batch=4", allreduce_share=0.9)
    shares = pd.concat([panel.assign(variant="run.per_gpu_batch=8"), other], ignore_index=True)
    fig = breakdown_bars(shares, model=model)
    _render(fig)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == len(shares) and len(set(labels)) == len(labels), labels
    assert all("\n" not in label and len(label) <= 4 for label in labels), labels  # a count and a letter
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sum(t.endswith("run.per_gpu_batch=4") for t in legend) == 1, legend
    letters = [t.split(":")[0] for t in legend if "run.per_gpu_batch=" in t]
    assert sorted(letters) == ["a", "b"] and {"1a", "1b"} <= set(labels)
    marks = next(line for line in ax.get_lines() if line.get_label() == "allreduce (total)")
    assert 90.0 in [round(v, 6) for v in marks.get_ydata()]  # the other cell's own allreduce mark


def test_efficiency_starts_at_100_percent(tables):
    fig = efficiency_vs_gpus(tables["scaled"])
    _render(fig)
    for line in fig.axes[0].get_lines():
        if not line.get_label().startswith("_") and len(line.get_xdata()) > 1:
            assert line.get_ydata()[0] == pytest.approx(100.0)


def test_breakdown_bars_stack_to_100_percent(tables):
    fig = breakdown_bars(tables["shares"], model="resnet50")
    _render(fig)
    ax = fig.axes[0]
    heights = np.array([p.get_height() for p in ax.patches]).reshape(4, -1)  # 4 parts x GPU counts
    assert heights.sum(axis=0) == pytest.approx(100.0)
    assert "allreduce (total)" in _labels(ax)


def test_reference_figure_has_every_model_and_loader_and_the_overlay(tables):
    reference = load_reference("aach2023")
    fig = reference_breakdown(reference)
    _render(fig)
    titles = {ax.get_title() for ax in fig.axes if ax.get_visible()}
    assert titles == {f"{m}, {loader}" for m in ("resnet50", "resnet101", "resnet152") for loader in ("DALI", "native")}
    # resnet50, DALI at 512 GPUs: 43.48 % allreduce, the third bar segment (data, compute, allreduce, other)
    ax = next(ax for ax in fig.axes if ax.get_title() == "resnet50, DALI")
    assert ax.patches[2 * 9 + 7].get_height() == pytest.approx(43.48)  # 9 GPU counts per part
    shares = tables["shares"].assign(model="resnet50", world_size=4)
    ours = reference_comparison(reference, shares[shares["loader"] == "dali"])
    fig = reference_breakdown(reference, ours=ours)
    ax = next(ax for ax in fig.axes if ax.get_title() == "resnet50, DALI")
    assert "top of exposed allreduce (this campaign)" in _labels(ax)


def test_dali_vs_native_ratio(tables):
    fig = dali_vs_native(tables["cells"])
    _render(fig)
    assert set(_labels(fig.axes[0])) == {"PyTorch-DDP", "Horovod"}


def test_framework_by_depth_draws_bars(tables):
    cells = pd.concat(
        [tables["cells"], tables["cells"].assign(model="resnet101", per_gpu_img_s=tables["cells"]["per_gpu_img_s"] / 2)]
    )
    fig = framework_by_depth(cells)
    _render(fig)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["resnet50", "resnet101"]


def test_telemetry_timeline_one_panel_per_metric(campaign):
    run_id = campaign.telemetry["run_id"].iloc[0]
    fig = telemetry_timeline(campaign.telemetry, run_id=run_id)
    _render(fig)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["gpu_util_percent", "gpu_mem_used (GB)", "gpu_power_w", "pcie_rx (GB/s)", "cpu_percent"]


def test_telemetry_timeline_of_the_sampler_format():
    """benchmarks/telemetry.py: telemetry_rank<R>.jsonl, Unix t_s, bytes; ranks sample at their own times."""
    t0 = 1.7e9
    rows = [
        {
            "run_id": "r",
            "t_s": t0 + i + 0.3 * rank,
            "rank": rank,
            "host": "h",
            "gpu_util_percent": 50.0 + rank + i,
            "gpu_mem_used_bytes": 2e9 + i,
            "gpu_mem_total_bytes": 8e10,
            "disk_read_bytes": 10.0 * i,
        }
        for rank in range(2)
        for i in range(10)
    ]
    fig = telemetry_timeline(pd.DataFrame(rows), run_id="r")
    _render(fig)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == ["gpu_util_percent", "gpu_mem_used (GB)"]  # totals and counters left out
    line = fig.axes[0].get_lines()[0]
    assert line.get_xdata()[0] == 0 and len(line.get_xdata()) == 10  # ranks binned together
    assert line.get_ydata()[0] == pytest.approx(50.5)


def test_commbench_curves_per_world_size(campaign):
    fig = commbench_curves(campaign.commbench)
    _render(fig)
    ax = next(ax for ax in fig.axes if ax.get_title() == "all_reduce")
    assert _labels(ax) == ["4 ranks", "32 ranks", "256 ranks"]
    assert ax.get_xscale() == "log"


def test_stash_bars_heights_are_the_stalls():
    stalls = pd.DataFrame(
        {
            "stall": ["interconnect", "network"],
            "framework": "ddp",
            "model": "resnet50",
            "loader": "synthetic",
            "world_size": 4,
            "num_nodes": [1, 2],
            "stall_pct": [20.0, 25.0],
        }
    )
    fig = stash_bars(stalls)
    _render(fig)
    assert [p.get_height() for p in fig.axes[0].patches[:2]] == [20.0, 25.0]


def test_step_timeline_marks_the_slow_steps():
    # run "a": 1 s steps with two of 2 s (slow); run "b": steady (not drawn)
    rows = [
        {
            "run_id": run,
            "step": step,
            "rank": 0,
            "samples": 4,
            "warmup": False,
            "step_s": 2.0 if run == "a" and step in (3, 7) else 1.0,
        }
        for run in ("a", "b")
        for step in range(10)
    ]
    steps = pd.DataFrame(rows)
    jittery = jittery_runs(steps, step_stability_runs(steps))
    assert set(jittery["run_id"]) == {"a"} and jittery["slow_time_pct"].iloc[0] == pytest.approx(100 * 2 / 12)
    fig = step_timeline(jittery, slow_factor=SLOW_STEP_FACTOR)
    _render(fig)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert list(ax.collections[0].get_offsets()[:, 0]) == [3, 7]  # the slow steps, marked
    assert "16.7% of the time in slow steps" in ax.get_title()
