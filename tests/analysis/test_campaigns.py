"""Reports never mix by accident (issue 64): a folder of two campaigns shows them side by side, each named,
a campaign column on every table; `--campaign NAME` keeps one; no two bars or curves of one figure share a
label (two campaigns, two batch sizes: the README tour after `make demo`); no table header or axis label is a
raw snake_case column name. On synthetic logs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from analysis.campaign_analysis import CampaignAnalysis
from analysis.load import load_campaign
from analysis.report import assemble
from analysis.results import format_results, results_table
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell
from ddlbench.cli import main

SNAKE = re.compile(r"^[a-z0-9]+(_[a-z0-9]+)+$")  # throughput_img_s_ci_low, peak_reserved_gib


def demo_and_tour(root: Path) -> Path:
    """runs/ after `make demo` and the README tour: demo (batch 16: native 1, 2 ranks, synthetic 2) and tour
    (batch 32: native, synthetic x 1, 2 ranks)."""
    for campaign, batch, cells in (
        ("demo", 16, [("native", 1), ("native", 2), ("synthetic", 2)]),
        ("tour", 32, [("native", 1), ("native", 2), ("synthetic", 1), ("synthetic", 2)]),
    ):
        part = root.parent / f"part-{campaign}"
        synth = [SynthCell("ddp", loader, "resnet50", n, 1, per_gpu_batch=batch) for loader, n in cells]
        write_campaign(part, synth, steps=30, warmup_steps=5, commbench=False, campaign=campaign)
        root.mkdir(exist_ok=True)
        shutil.move(part / campaign, root / campaign)
    return root


def test_results_name_each_campaign_and_pool_none(tmp_path):
    root = demo_and_tour(tmp_path / "runs")
    table, excluded = results_table(root)
    assert table["campaign"].tolist() == ["demo"] * 3 + ["tour"] * 4  # one row per campaign's cell, none pooled
    assert len(CampaignAnalysis(root).cells()) == 7
    assert "campaign" in format_results(table, excluded).splitlines()[0]
    one, _ = results_table(root / "tour")
    assert "campaign" not in one and len(one) == 4


def test_the_campaign_flag_keeps_one_and_a_wrong_name_says_which_are_there(tmp_path, capsys):
    root = demo_and_tour(tmp_path / "runs")
    assert main(["results", str(root)]) == 0
    assert f"{root} holds 2 campaigns: demo (3 runs), tour (4 runs)" in " ".join(capsys.readouterr().out.split())
    assert main(["results", str(root), "--campaign", "tour"]) == 0
    out = capsys.readouterr().out
    assert "holds 2 campaigns" not in out and "campaign" not in out.splitlines()[0]
    assert main(["results", str(root), "--campaign", "nope"]) == 2
    assert re.search(r"--campaign nope: .* holds demo, tour: pass one of them", capsys.readouterr().err)


def test_no_two_bars_or_curves_of_one_axes_share_a_label_and_no_header_is_a_column_name(tmp_path):
    root = demo_and_tour(tmp_path / "runs")
    blocks, figures = assemble(load_campaign(root))
    texts = [str(b.content) for b in blocks if b.kind == "text"]
    assert any("holds 2 campaigns: demo (3 runs), tour (4 runs)" in t for t in texts), texts
    tables = [b.content for b in blocks if b.kind == "table"]
    cell_tables = [t for t in tables if "img/s" in t or "data %" in t]
    assert cell_tables and all(t.columns[0] == "campaign" for t in cell_tables)
    for table in tables:
        raw = [c for c in table.columns if SNAKE.match(str(c))]
        assert not raw, (list(table.columns), raw)
    assert figures
    for name, draw in figures.items():
        fig = draw()
        fig.canvas.draw()
        for ax in fig.axes:
            for label in (ax.get_xlabel(), ax.get_ylabel()):
                assert not SNAKE.match(label), (name, label)
            ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()] if ax.patches else []
            if ax.patches and len({round(p.get_x(), 6) for p in ax.patches}) == len(ticks):
                assert len(set(ticks)) == len(ticks), (name, ticks)
            lines = [h for h in ax.get_legend_handles_labels()[1] if not h.startswith("_")]
            assert len(set(lines)) == len(lines), (name, lines)
    breakdown = figures["breakdown_resnet50"]()
    breakdown.canvas.draw()
    native = [t.get_text() for t in breakdown.axes[0].get_xticklabels()]
    assert native == ["1\nb16, demo", "1\nb32, tour", "2\nb16, demo", "2\nb32, tour"], native
