"""Answers that never mislead (issue 49): CPU ranks are never called GPUs (results, report tables, axes,
titles), a cell run once says it has no interval, the scaling section says whether two cells differ by more
than the run-to-run spread, and no curve or bar label repeats what all of them share. On synthetic logs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from analysis.campaign_analysis import CampaignAnalysis
from analysis.figures import cell_labels, curves, gpu_labels, shared_parts
from analysis.load import load_campaign
from analysis.modes import mode_labels
from analysis.report import assemble
from analysis.results import format_results, results_table
from analysis.scaling import ONE_REPEAT, close_pairs, run_to_run_spread
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell


def on_cpu(root: Path, *, only: str = "") -> None:
    """Make synthetic GPU runs CPU runs, as `system=local_cpu` writes them: system.device=cpu in
    config.yaml, no GPUs in meta.json, a CPU in each rank log's header (`only`: runs whose name holds it)."""
    for config in root.rglob("config.yaml"):
        run = config.parent
        if only not in run.name:
            continue
        config.write_text(config.read_text().replace("device: cuda", "device: cpu").replace("nccl", "gloo"))
        meta = json.loads((run / "meta.json").read_text())
        meta["hardware"] = {"host": "vm", "gpus": [], "cpu_count": 2}
        (run / "meta.json").write_text(json.dumps(meta))
        for log in run.glob("rank*.jsonl"):
            head, _, rest = log.read_text().partition("\n")
            header = json.loads(head)
            header["device"] = "cpu"
            log.write_text(json.dumps(header) + "\n" + rest)


def tour(root: Path, *, repeats: int = 1, cpu: bool = True, campaign: str = "synth") -> Path:
    """The README's tour in synthetic logs: DDP x native, synthetic x 1, 2 ranks."""
    cells = [
        SynthCell("ddp", loader, "resnet50", world, 1, per_gpu_batch=32, repeat=r)
        for loader in ("native", "synthetic")
        for world in (1, 2)
        for r in range(repeats)
    ]
    write_campaign(root, cells, steps=30, warmup_steps=5, commbench=False, campaign=campaign)
    if cpu:
        on_cpu(root)
    return root


def _tables(blocks) -> list[pd.DataFrame]:
    return [b.content for b in blocks if b.kind == "table"]


def _figure(figures, name):
    fig = figures[name]()
    fig.canvas.draw()
    return fig


def test_a_cpu_campaign_says_ranks_cpu_where_a_gpu_one_says_gpus(tmp_path):
    """Before: `results` headed CPU ranks "GPUs" and "img/s/GPU", the report's columns per_gpu_img_s and
    baseline_gpus, its axes "GPUs" and its efficiency title "vs 1 GPU"."""
    root = tour(tmp_path / "cpu")
    table, excluded = results_table(root)
    assert {"ranks (CPU)", "img/s/rank", "batch/rank", "vs ranks"} <= set(table.columns)
    text = format_results(table, excluded)
    assert "GPU" not in text, text

    blocks, figures = assemble(load_campaign(root))
    scaling = next(t for t in _tables(blocks) if "img/s" in t)
    assert {"img/s/rank", "batch/rank", "vs ranks"} <= set(scaling.columns)
    assert not any("gpu" in c.lower() for c in scaling.columns if "GiB" not in c)
    for name in ("throughput_vs_gpus", "efficiency_vs_gpus", "breakdown_resnet50"):
        fig = _figure(figures, name)
        for ax in fig.axes:
            assert ax.get_xlabel() in ("", "ranks (CPU)"), (name, ax.get_xlabel())
            assert "GPU" not in ax.get_title(), (name, ax.get_title())
    efficiency = _figure(figures, "efficiency_vs_gpus")
    assert "vs 1 CPU rank" in efficiency.axes[0].get_title()
    captions = [b.content[1] for b in blocks if b.kind == "figure"]
    assert not any("GPU" in c for c in captions if "peak" not in c), captions

    gpu = tour(tmp_path / "gpu", cpu=False)  # a GPU campaign keeps its words
    table, _ = results_table(gpu)
    assert {"GPUs", "img/s/GPU", "batch/GPU", "vs GPUs"} <= set(table.columns)


def test_a_campaign_of_both_devices_says_which_cell_ran_on_which(tmp_path):
    """A cell on CPU ranks and one on GPUs are two cells; the table says so in a device column."""
    root = tour(tmp_path / "mixed", cpu=False)
    on_cpu(root, only="native")
    table, _ = results_table(root)
    assert "ranks (GPU or CPU)" in table.columns
    devices = dict(zip(table["loader"], table["device"]))
    assert devices == {"native": "CPU", "synthetic": "GPU"}


def test_a_cell_run_once_says_it_has_no_interval_and_the_report_says_what_one_repeat_cannot_show(tmp_path):
    """Before: the interval columns were blank for a single repeat, with no reason, and a cell slower than
    another by a few percent read as a result."""
    root = tour(tmp_path / "once")
    blocks, _ = assemble(load_campaign(root))
    scaling = next(t for t in _tables(blocks) if "img/s" in t)
    assert (scaling["img/s 95% CI low"] == ONE_REPEAT).all()
    texts = [b.content for b in blocks if b.kind == "text"]
    assert any("One repeat cannot show the run-to-run spread" in t for t in texts), texts
    assert "nothing measures the run-to-run spread" in format_results(*results_table(root))


def test_the_scaling_section_names_cells_closer_than_the_measured_spread(tmp_path):
    """With repeats, the spread is measured (the median over cells of (max - min) / median of their repeats)
    and stated; pairs of cells of one size closer than it are named as within the noise."""
    root = tour(tmp_path / "repeats", repeats=3)
    analysis = CampaignAnalysis(root)
    spread = run_to_run_spread(analysis.run_throughput().merge(analysis.counted()[["run_id", "cell_hash"]]))
    assert len(spread) == 4 and (spread["num_repeats"] == 3).all()
    blocks, _ = assemble(load_campaign(root))
    scaling = next(t for t in _tables(blocks) if "img/s" in t)
    assert not (scaling["img/s 95% CI low"].astype(str) == ONE_REPEAT).any()
    text = next(b.content for b in blocks if b.kind == "text" and str(b.content).startswith("Noise:"))
    assert f"{spread['spread'].median():.1%}" in text and "4 cells with repeats" in text

    cells = pd.DataFrame(
        {
            "model": ["resnet50"] * 3,
            "world_size": [1, 1, 1],
            "num_nodes": [1, 1, 1],
            "framework": ["ddp"] * 3,
            "loader": ["native", "synthetic", "dali"],
            "throughput_img_s": [100.0, 97.0, 80.0],
        }
    )
    pairs = close_pairs(cells, 0.05)
    assert pairs[["a", "b"]].values.tolist() == [["native", "synthetic"]]
    assert pairs["rel_diff"].iloc[0] == pytest.approx(0.03)


def _parts(label: str) -> list[str]:
    return [p.strip(" []") for p in label.replace(" [", ", ").split(", ") if p.strip(" []")]


def assert_no_shared_part(labels: list[str]) -> None:
    """No label repeats what all labels share (a framework, a loader, a system profile, ...)."""
    assert len(labels) > 1
    assert shared_parts([_parts(label) for label in labels]) == [], labels


def test_no_curve_or_bar_label_repeats_what_all_of_them_share():
    """Before: composable2023's bars read "PyTorch-DDP, amp_bf16 [framework.zero_optimizer=True,
    system.name=local_cpu]", the system profile repeated on every bar, and a mode had no name users say."""
    variant = [
        "framework.zero_optimizer=False, system.name=local_cpu",
        "framework.zero_optimizer=True, system.name=local_cpu",
    ]
    modes = pd.DataFrame(
        {
            "framework": ["ddp", "ddp", "ddp", "fsdp", "deepspeed", "deepspeed"],
            "mode": ["ddp", "ddp", "ddp", "fsdp", "deepspeed ZeRO-2", "deepspeed ZeRO-2"],
            "precision": ["fp32", "amp_bf16", "fp32", "fp32", "fp32", "amp_bf16"],
            "variant": [
                variant[0],
                variant[0],
                variant[1],
                "system.name=local_cpu",
                "system.name=local_cpu",
                "system.name=local_cpu",
            ],
        }
    )
    labels = mode_labels(modes)
    assert labels == ["DDP", "DDP + AMP", "DDP + ZeRO optimizer", "FSDP2", "DeepSpeed ZeRO-2", "DeepSpeed ZeRO-2 + AMP"]
    assert_no_shared_part(labels)

    cells = pd.DataFrame(
        {
            "framework": ["ddp", "ddp", "ddp", "ddp"],
            "loader": ["native", "synthetic", "native", "synthetic"],
            "model": ["resnet50"] * 4,
            "precision": ["fp32"] * 4,
            "per_gpu_batch": [32] * 4,
            "world_size": [1, 1, 2, 2],
            "num_nodes": [1] * 4,
            "variant": ["system.name=local_cpu"] * 4,
            "group_hash": ["a", "b", "a", "b"],
            "device": ["cpu"] * 4,
        }
    )
    drawn, shared = curves(cells)
    assert_no_shared_part([c.label for c in drawn])
    assert shared == ["PyTorch-DDP", "system.name=local_cpu"]  # said once, in the panel's title
    assert len({c.color for c in drawn}) == len(drawn)  # one colour per curve
    assert_no_shared_part(cell_labels(cells))
    assert "2 CPU ranks" in cell_labels(cells)[-1]
    bars = cells.assign(variant=["bucket=25, system.name=local_cpu", "bucket=100, system.name=local_cpu"] * 2)
    labels, key = gpu_labels(bars.sort_values("world_size"))
    assert labels == ["1a", "1b", "2a", "2b"] and len(key) == 2  # a letter per setting, at every count
    assert_no_shared_part([line.split(": ", 1)[1] for line in key])


def test_a_paper_of_cpu_runs_names_its_columns_for_ranks(tmp_path):
    """`ddlbench paper` over CPU runs: before, its tables headed the CPU ranks' batch per_gpu_batch and the
    baseline baseline_gpus."""
    from analysis.papers import STUDIES
    from analysis.papers.build import build_paper

    root = tour(tmp_path / "cpu", campaign=STUDIES["aach2023"].campaigns[0])
    build_paper("aach2023", root, tmp_path / "paper", jobs=1, draw=False)
    text = (tmp_path / "paper" / "paper.md").read_text()
    assert "baseline_ranks" in text and "baseline_gpus" not in text and "per_gpu_" not in text
