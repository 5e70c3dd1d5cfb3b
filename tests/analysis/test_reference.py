"""The aach2023 reference overlay compares like with like: the seed's AllReduce / data / compute are parts of
one runtime, so this campaign's side is exposed allreduce / data / compute without it / other, stacked the
same way (never past 100%), drawn inside the axes, and a campaign without a matching cell is told so."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import Line2D

from analysis.load import load_reference
from analysis.reference_overlay import reference_breakdown, reference_comparison, reference_section
from analysis.report import assemble, build_report
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell
from tests.analysis.conftest import CAMPAIGN

NO_MATCH = "no cell of this campaign matches a reference cell (model, loader, GPUs)"


@pytest.fixture(scope="module")
def reference():
    return load_reference("aach2023")


def _cell(
    framework="ddp",
    loader="dali",
    model="resnet50",
    world_size=4,
    *,
    precision="amp_bf16",
    data=0.20,
    compute=0.50,
    total=0.40,
    exposed=0.10,
    other=0.20,
    **extra,
) -> dict:
    """One breakdown cell as time_shares.breakdown_cells gives it (shares of step time)."""
    return {
        "framework": framework,
        "loader": loader,
        "model": model,
        "precision": precision,
        "per_gpu_batch": 64,
        "world_size": world_size,
        "num_nodes": 1,
        "variant": "",
        "data_share": data,
        "compute_share": compute,
        "allreduce_share": total,
        "allreduce_exposed_share": exposed,
        "other_share": other,
        "host_data_share": np.nan,
        **extra,
    }


def _draw(fig):
    """Draw on an Agg canvas (the extents below are its pixels) and return its renderer."""
    FigureCanvasAgg(fig).draw()
    fig.savefig(io.BytesIO(), format="png", dpi=60)
    return fig.canvas.get_renderer()


def _marker_lines(fig) -> list[Line2D]:
    return [line for ax in fig.axes for line in ax.get_lines() if len(line.get_xdata())]


def test_reference_comparison_puts_exposed_allreduce_beside_the_seeds(reference):
    shares = pd.DataFrame([_cell(), _cell("horovod"), _cell(world_size=2), _cell(model="resnet18")])
    side = reference_comparison(reference, shares)
    assert len(side) == 1  # horovod, 2 GPUs and resnet18 have no reference cell
    row = side.iloc[0]
    assert (row["model"], row["loader"], row["gpus"]) == ("resnet50", "dali", 4)
    # the seed's resnet50 / DALI / 4 GPUs: 15.40 allreduce, 22.00 data, 32.50 compute, the rest 30.10
    assert row[["allreduce_pct_ref", "data_pct_ref", "compute_pct_ref", "other_pct_ref"]].tolist() == pytest.approx(
        [15.40, 22.00, 32.50, 30.10]
    )
    # ours: the exposed 10%, not the total 40% (which overlaps backward)
    assert row[
        ["allreduce_exposed_pct_here", "data_pct_here", "compute_pct_here", "other_pct_here"]
    ].tolist() == pytest.approx([10.0, 20.0, 50.0, 20.0])
    # stacked like the bars: data, + compute, + exposed allreduce; other fills up to 100
    assert row[["data_top_pct", "compute_top_pct", "allreduce_top_pct"]].tolist() == pytest.approx([20.0, 70.0, 80.0])
    assert row["series"] == ""


def test_reference_comparison_untimed_allreduce_stays_inside_compute(reference):
    shares = pd.DataFrame([_cell(loader="native", compute=0.70, total=np.nan, exposed=np.nan, other=0.10)])
    row = reference_comparison(reference, shares).iloc[0]
    assert np.isnan(row["allreduce_exposed_pct_here"]) and np.isnan(row["compute_pct_here"])
    assert np.isnan(row["compute_top_pct"])
    assert row["allreduce_top_pct"] == pytest.approx(90.0)  # top of compute + allreduce: 100 - other


def test_reference_markers_stack_within_100_percent_and_inside_the_axes(reference):
    # a step that is all data, compute and a large total allreduce: stacking the total would reach 125%
    shares = pd.DataFrame(
        [
            _cell(data=0.25, compute=0.60, total=0.40, exposed=0.15, other=0.0),
            _cell(loader="native", world_size=512, data=0.02, compute=0.18, total=0.85, exposed=0.80, other=0.0),
        ]
    )
    side = reference_comparison(reference, shares)
    fig = reference_breakdown(reference, ours=side)
    renderer = _draw(fig)
    lines = _marker_lines(fig)
    heights = np.concatenate([np.asarray(line.get_ydata(), float) for line in lines])
    assert len(lines) == 6 and heights.max() == pytest.approx(100.0) and heights.max() <= 100.0 + 1e-9
    panels = [ax for ax in fig.axes if ax.get_visible()]
    for ax in panels:
        assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > 100 and max(ax.get_yticks()) == 100
        box = ax.get_window_extent(renderer)
        for artist in [*ax.patches, *ax.get_lines()]:
            if isinstance(artist, Line2D) and not len(artist.get_xdata()):
                continue  # a legend-only handle
            extent = artist.get_window_extent(renderer)
            assert artist.get_clip_on()
            assert box.x0 - 0.5 <= extent.x0 and extent.x1 <= box.x1 + 0.5, artist
            assert box.y0 - 0.5 <= extent.y0 and extent.y1 <= box.y1 + 0.5, artist
    # titles: the figure's above every panel's, each panel's clear of the other panels
    suptitle = fig.get_suptitle()
    assert "this campaign's DDP cells (markers)" in suptitle and NO_MATCH not in suptitle
    top = fig._suptitle.get_window_extent(renderer)
    for ax in panels:
        title = ax.title.get_window_extent(renderer)
        assert top.y0 >= title.y1
        assert not any(title.overlaps(other.get_window_extent(renderer)) for other in panels)


def test_reference_without_a_matching_cell_says_so(reference):
    shares = pd.DataFrame([_cell(world_size=2), _cell("horovod"), _cell(model="resnet18")])
    side = reference_comparison(reference, shares)
    assert side.empty
    fig = reference_breakdown(reference, ours=side)
    renderer = _draw(fig)
    assert NO_MATCH in fig.get_suptitle() and "markers" not in fig.get_suptitle()
    assert _marker_lines(fig) == []
    top = fig._suptitle.get_window_extent(renderer)  # two lines, still above the panel titles
    assert all(top.y0 >= ax.title.get_window_extent(renderer).y1 for ax in fig.axes if ax.get_visible())
    # the report section says so in words and shows no table
    blocks, figures = [], {}
    reference_section(blocks, figures, reference, "aach2023", shares)
    texts = [str(b.content) for b in blocks if b.kind == "text"]
    assert any(t.startswith("No cell of this campaign matches a reference cell (model, loader, GPUs)") for t in texts)
    assert not [b for b in blocks if b.kind == "table"]
    ((name, caption),) = [b.content for b in blocks if b.kind == "figure"]
    assert "no markers" in caption and "Markers:" not in caption
    assert NO_MATCH in figures[name]().get_suptitle()
    # without a campaign (nothing counted) the same words
    blocks = []
    reference_section(blocks, {}, reference, "aach2023", None)
    assert any("No cell of this campaign matches" in str(b.content) for b in blocks if b.kind == "text")


def test_reference_several_cells_for_one_reference_cell_are_each_shown(reference):
    shares = pd.DataFrame(
        [
            _cell(precision="amp_bf16", data=0.10, compute=0.70, exposed=0.05, other=0.15),
            _cell(precision="fp32", data=0.05, compute=0.80, exposed=0.10, other=0.05),
        ]
    )
    side = reference_comparison(reference, shares)
    assert side["series"].tolist() == ["amp_bf16", "fp32"]
    assert side["data_pct_here"].tolist() == pytest.approx([10.0, 5.0])
    assert side["allreduce_exposed_pct_here"].tolist() == pytest.approx([5.0, 10.0])
    assert side["data_pct_ref"].tolist() == pytest.approx([22.0, 22.0])  # one reference cell, twice
    fig = reference_breakdown(reference, ours=side)
    _draw(fig)
    lines = _marker_lines(fig)
    assert len(lines) == 6  # 3 parts x 2 configurations
    assert len({line.get_markerfacecolor() for line in lines}) == 2
    assert len({float(line.get_xdata()[0]) for line in lines}) == 2  # side by side, not on top of each other
    labels = {label for ax in fig.axes for label in ax.get_legend_handles_labels()[1]}
    assert {"amp_bf16", "fp32", "top of data (this campaign)", "top of exposed allreduce (this campaign)"} <= labels
    blocks = []
    reference_section(blocks, {}, reference, "aach2023", shares)
    (table,) = [b.content for b in blocks if b.kind == "table"]
    assert table["precision"].tolist() == ["amp_bf16", "fp32"] and len(table) == 2
    assert "variant" not in table  # no cell has one
    assert {"allreduce_pct_ref", "allreduce_exposed_pct_here", "compute_pct_ref", "compute_pct_here"} <= set(table)


def test_report_reference_overlay_end_to_end(tmp_path, reference):
    """Golden campaign: DDP at 4 GPUs (2 nodes) matches resnet50 / DALI and native / 4 GPUs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(CAMPAIGN, tmp_path / "rep", reference="aach2023", formats=("png",), jobs=1)
    text = (tmp_path / "rep" / "report.md").read_text()
    start = text.index("## Compared with aach2023")
    section = text[start : text.index("\n## ", start)]  # to the next section
    assert "2 of 6 PyTorch-DDP cells match a reference cell" in section
    head = next(line for line in section.splitlines() if line.startswith("| model"))
    assert "allreduce exposed % (here)" in head and "allreduce % (here)" not in head
    rows = [line for line in section.splitlines() if line.startswith("| resnet50")]
    assert [r.split(" | ")[1:3] for r in rows] == [["dali", "4"], ["native", "4"]]
    assert "No cell of this campaign matches" not in section
    assert (tmp_path / "rep" / "figures" / "reference_aach2023.png").exists()


def test_report_reference_no_match_and_several_cells_end_to_end(tmp_path, reference):
    cells = [SynthCell("ddp", "dali", "resnet50", 2, 1), SynthCell("horovod", "dali", "resnet50", 4, 1)]
    write_campaign(tmp_path / "none", cells, steps=20, warmup_steps=2, commbench=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from analysis.load import load_campaign

        blocks, figures = assemble(load_campaign(tmp_path / "none"), reference=reference, reference_name="aach2023")
    texts = " ".join(str(b.content) for b in blocks if b.kind == "text")
    assert "No cell of this campaign matches a reference cell (model, loader, GPUs): 1 PyTorch-DDP cell(s)" in texts
    assert NO_MATCH in figures["reference_aach2023"]().get_suptitle()

    cells = [
        SynthCell("ddp", "dali", "resnet50", 4, 1),
        SynthCell("ddp", "dali", "resnet50", 4, 1, per_gpu_batch=128),
        SynthCell("ddp", "native", "resnet50", 8, 2, comm_measured=False),
    ]
    write_campaign(tmp_path / "two", cells, steps=20, warmup_steps=2, commbench=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        blocks, figures = assemble(load_campaign(tmp_path / "two"), reference=reference, reference_name="aach2023")
    table = next(b.content for b in blocks if b.kind == "table" and "allreduce exposed % (here)" in b.content)
    assert table[["loader", "GPUs", "batch/GPU"]].values.tolist() == [
        ["dali", 4, 64],
        ["dali", 4, 128],
        ["native", 8, 64],
    ]
    untimed = table.iloc[2]
    assert np.isnan(untimed["allreduce exposed % (here)"]) and np.isnan(untimed["compute % (here)"])
    fig = figures["reference_aach2023"]()
    _draw(fig)
    heights = np.concatenate([np.asarray(line.get_ydata(), float) for line in _marker_lines(fig)])
    assert np.nanmax(heights) <= 100.0 + 1e-9
