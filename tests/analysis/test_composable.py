"""Seed study C's comparison of data-parallel modes and precisions (modes.mode_cells, the report's "Modes and
precisions" section, conf/experiment/composable_2023*.yaml) and the per-host step and collective times that
name the slow hosts of a multi-node run (hosts.host_times, the "Hosts" section): values against
hand-computed ones from small run directories written here and by synthetic_logs, the sample unit in every
throughput column, the sections only where their data exist, and the CPU study end to end."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.campaign_analysis import CampaignAnalysis
from analysis.cells import peak_memory
from analysis.hosts import _rank_ranges, host_times, slow_hosts
from analysis.load import load_campaign
from analysis.modes import mode_bars, mode_cells, mode_labels
from analysis.report import assemble, build_report
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell

GIB = 2**30
MODELS = {"resnet50": {"arch": "resnet", "depth": 50}, "bert_base": {"arch": "bert", "size": "base"}}


def write_run(
    root: Path,
    name: str,
    *,
    framework: str,
    precision: str = "fp32",
    model: str = "resnet50",
    settings: dict | None = None,
    step_s: float = 0.1,
    batch: int = 8,
    world: int = 2,
    processes: int | None = None,
    unit: str | None = "images",
    peaks: tuple[int, int] | None = None,
    telemetry: dict[str, list[float]] | None = None,
) -> Path:
    """A completed run directory: config.yaml, meta.json, `processes` rank logs of 2 warm-up and 4 measured
    steps of step_s each (batch x world samples per step over all ranks), summary.json with its sample unit
    (None: a summary from before it) and peak memory, and rank 0's telemetry samples where given."""
    processes = processes or world
    cfg = {
        "framework": {"name": framework, **(settings or {})},
        "loader": {"name": "synthetic"},
        "model": MODELS[model],
        "precision": {"name": precision},
        "system": {"name": "h200", "device": "cuda"},
        "run": {"campaign": "study", "repeat": 0, "per_gpu_batch": batch},
    }
    run_dir = root / "study" / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    meta = {"schema_version": 1, "world_size": world, "num_nodes": 1, "num_processes": processes}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    for rank in range(processes):
        header = {"kind": "header", "schema_version": 1, "rank": rank, "host": "h1", "local_rank": rank}
        steps = [
            {"step": s, "samples": batch * world // processes, "warmup": s < 2, "step_s": step_s} for s in range(6)
        ]
        (run_dir / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [header, *steps]))
    summary = {"schema_version": 1, "status": "completed"}
    if unit is not None:
        summary["sample_unit"] = unit
    if peaks is not None:
        summary.update(peak_allocated_bytes=peaks[0], peak_reserved_bytes=peaks[1])
    (run_dir / "summary.json").write_text(json.dumps(summary))
    if telemetry:
        count = len(next(iter(telemetry.values())))
        lines = [
            {"t_s": 1000.0 + i, "rank": 0, "host": "h1", **{k: v[i] for k, v in telemetry.items()}}
            for i in range(count)
        ]
        (run_dir / "telemetry_rank0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


@pytest.fixture
def study(tmp_path) -> Path:
    """ResNet-50 (images) in six modes and precisions, BERT-base (sequences) in two, and a group without the
    baseline (batch 16: DDP and FSDP in AMP only)."""
    root = tmp_path / "runs"
    telemetry = {
        "gpu_util_percent": [50.0, 70.0],
        "pcie_rx_bytes_s": [1e9, 3e9],
        "pcie_tx_bytes_s": [0.5e9, 0.5e9],
    }
    write_run(
        root, "ddp", framework="ddp", settings={"zero_optimizer": False}, peaks=(4 * GIB, 5 * GIB), telemetry=telemetry
    )
    write_run(
        root, "ddp_zero", framework="ddp", settings={"zero_optimizer": True}, step_s=0.125, peaks=(3 * GIB, 4 * GIB)
    )
    write_run(root, "ddp_amp", framework="ddp", precision="amp_fp16", settings={"zero_optimizer": False}, step_s=0.05)
    write_run(root, "fsdp", framework="fsdp", step_s=0.2, unit=None)  # a summary from before sample_unit: images
    write_run(root, "ds", framework="deepspeed", settings={"zero_stage": 2}, step_s=0.16)
    write_run(root, "dp", framework="dp", step_s=0.4, processes=1)  # one process driving both GPUs
    write_run(root, "bert", framework="ddp", model="bert_base", unit="sequences", step_s=0.2)
    write_run(root, "bert_amp", framework="ddp", model="bert_base", unit="sequences", precision="amp_fp16", step_s=0.1)
    write_run(root, "b16", framework="ddp", precision="amp_fp16", batch=16, step_s=0.1)  # no baseline in its group
    write_run(root, "b16_fsdp", framework="fsdp", precision="amp_fp16", batch=16, step_s=0.1)
    return root


def _modes(root: Path) -> pd.DataFrame:
    analysis = CampaignAnalysis(root)
    counted = analysis.counted()
    return mode_cells(analysis.cells(), counted, utilisation=analysis.utilisation(), memory=peak_memory(counted))


def test_mode_cells_by_hand(study):
    table = _modes(study)
    # the batch-16 group has no DDP fp32 cell: no baseline, so it is no comparison
    assert set(table["per_gpu_batch"]) == {8}
    assert len(table) == 8
    by = {(r.model, r.mode, r.precision, r.variant): r for r in table.itertuples(index=False)}
    ddp = "framework.zero_optimizer=False"
    # throughput = 16 samples per step / step_s; relative_time = the baseline's throughput (160) / the cell's
    expected = {
        ("resnet50", "ddp", "fp32", ddp): (160.0, 1.0),
        ("resnet50", "ddp", "fp32", "framework.zero_optimizer=True"): (128.0, 1.25),
        ("resnet50", "ddp", "amp_fp16", ddp): (320.0, 0.5),
        ("resnet50", "fsdp", "fp32", ""): (80.0, 2.0),
        ("resnet50", "deepspeed ZeRO-2", "fp32", ""): (100.0, 1.6),
        ("resnet50", "dp", "fp32", ""): (40.0, 4.0),
        # config.yaml without zero_optimizer (as written before it existed): the baseline reads it as off
        ("bert_base", "ddp", "fp32", ""): (80.0, 1.0),
        ("bert_base", "ddp", "amp_fp16", ""): (160.0, 0.5),
    }
    assert set(by) == set(expected)
    for key, (samples_s, relative) in expected.items():
        assert by[key].samples_s == pytest.approx(samples_s), key
        assert by[key].relative_time == pytest.approx(relative), key
    assert [r.is_baseline for r in table.itertuples()].count(True) == 2
    units = table.drop_duplicates("model").set_index("model")["sample_unit"].to_dict()
    assert units == {"resnet50": "images", "bert_base": "sequences"}  # fsdp's old summary counts images
    base = by[("resnet50", "ddp", "fp32", ddp)]
    assert base.gpu_util_pct_mean == pytest.approx(60.0)
    assert base.pcie_rx_gb_s_mean == pytest.approx(2.0) and base.pcie_tx_gb_s_mean == pytest.approx(0.5)
    assert base.peak_allocated_gib == pytest.approx(4.0) and base.peak_reserved_gib == pytest.approx(5.0)
    assert by[("resnet50", "ddp", "fp32", "framework.zero_optimizer=True")].peak_allocated_gib == pytest.approx(3.0)
    assert math.isnan(by[("resnet50", "fsdp", "fp32", "")].gpu_util_pct_mean)  # no telemetry
    # the study's order within a group: DP, DDP, FSDP, DeepSpeed; each mode's fp32 before its AMP
    resnet = table[table["model"] == "resnet50"]
    assert list(resnet["framework"]) == ["dp", "ddp", "ddp", "ddp", "fsdp", "deepspeed"]


def test_two_baseline_cells_give_no_relative_time(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "a", framework="ddp", settings={"bucket_cap_mb": 25.0})
    write_run(root, "b", framework="ddp", settings={"bucket_cap_mb": 50.0}, step_s=0.2)
    write_run(root, "c", framework="fsdp", step_s=0.2)
    table = _modes(root)
    assert len(table) == 3 and table["relative_time"].isna().all()  # which DDP fp32 is the baseline is unknown


def test_one_mode_or_precision_gives_no_comparison(campaign):
    analysis = CampaignAnalysis(campaign.root, campaign=campaign)
    counted = analysis.counted()
    table = mode_cells(analysis.cells(), counted, utilisation=analysis.utilisation(), memory=peak_memory(counted))
    assert table.empty  # synthetic_logs' campaign: DDP and Horovod in AMP, no DDP fp32 baseline
    blocks, figures = assemble(campaign)
    assert "Modes and precisions" not in [b.content for b in blocks if b.kind == "heading"]
    assert not any(name.startswith("modes_") for name in figures)


def test_every_bar_is_labelled_with_its_full_configuration(study):
    table = _modes(study)
    rows = table[table["model"] == "resnet50"]
    labels = mode_labels(rows)
    assert labels == [  # each mode as users name it (issue 49)
        "DataParallel",
        "DDP",
        "DDP + AMP",
        "DDP + ZeRO optimizer",
        "FSDP2",
        "DeepSpeed ZeRO-2",
    ]
    fig = mode_bars(rows, title="resnet50")
    panels = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert panels == [
        "training time (baseline = 1)",
        "GPU util",
        "peak GPU memory",
        "PCIe rx (to GPU)",
        "PCIe tx (from GPU)",
    ]
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks == labels
    # alike labels are numbered, never merged
    twice = pd.concat([rows.iloc[:1], rows.iloc[:1]])
    assert mode_labels(twice) == ["DataParallel #1", "DataParallel #2"]


def test_the_report_names_the_baseline_and_the_sample_unit(study, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(study, tmp_path / "rep", formats=("png",), jobs=1)
    text = (tmp_path / "rep" / "report.md").read_text()
    section = text.split("## Modes and precisions", 1)[1].split("\n## ", 1)[0]
    assert "framework=ddp, precision=fp32, framework.zero_optimizer=false" in section
    tables = [block for block in section.split("\n\n") if block.startswith("| model")]
    assert len(tables) == 2  # one table per sample unit, never mixed
    images, sequences = tables
    assert "img/s" in images and "seq" not in images and "bert" not in images
    assert "seq/s" in sequences and "img" not in sequences and "resnet" not in sequences
    assert "Models whose samples are sequences (seq/s):" in section
    assert section.count("![Modes and precisions,") == 2  # a figure per group
    assert (tmp_path / "rep" / "figures" / "modes_0.png").is_file()
    # the throughput table is split by unit too: a BERT row never reads img/s
    scaling = text.split("## Throughput and weak scaling", 1)[1].split("\n## ", 1)[0]
    for block in scaling.split("\n\n"):
        if block.startswith("| framework"):
            assert ("bert_base" in block) == ("seq/s" in block) != ("img/s" in block)
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Modes and precisions</h2>" in html and ">seq/s</th>" in html


@pytest.mark.heavy
def test_the_study_plans_every_mode_precision_and_model(cli):
    """Heavy (18 s on the CI machine: 50 Hydra compositions): the fast tier plans the CPU study
    (test_the_cpu_study_plans_its_modes), the same experiment's code with its own cells."""
    plan = cli("campaign", "plan", "experiment=composable_2023")
    assert plan.returncode == 0, plan.stderr[-2000:]
    cells = [line.split()[0] for line in plan.stdout.splitlines() if re.match(r"[a-z]+-synthetic-", line)]
    assert len(cells) == 50
    names = {re.sub(r"-[0-9a-f]{8}-r0$", "", c) for c in cells}
    for framework in ("dp", "ddp", "fsdp", "deepspeed"):
        for model in ("resnet50", "mobilenet_v2", "retinanet", "bert_base", "bert_large"):
            for precision in ("fp32", "amp_fp16"):
                assert any(n.startswith(f"{framework}-synthetic-{model}-{precision}-g4-n1-") for n in names)
    assert sum(c.startswith("ddp-") for c in cells) == 20  # DDP and DDP with the ZeRO optimizer
    assert "48 planned" in plan.stdout  # DataParallel cannot split RetinaNet's boxes: 2 impossible, with why


def test_the_cpu_study_plans_its_modes(cli):
    cpu = cli("campaign", "plan", "experiment=composable_2023_cpu")
    assert cpu.returncode == 0 and "16 cells: 16 planned" in cpu.stdout, cpu.stderr[-2000:]
    assert not re.search(r"^dp-", cpu.stdout, re.MULTILINE)  # no DataParallel on CPUs


# --- hosts --------------------------------------------------------------------------------------------


def _steps(run_id: str, rank: int, **phases: list[float]) -> list[dict]:
    count = len(next(iter(phases.values())))
    return [
        {"run_id": run_id, "rank": rank, "step": i, "warmup": False, **{k: v[i] for k, v in phases.items()}}
        for i in range(count)
    ]


@pytest.fixture
def host_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run a: three hosts of two ranks; h2's ranks compute 12 ms where the others compute 10, and the others
    wait 1 ms more in the collectives; steps of 16 ms (rank 0's second: 18). Run b: one host."""
    ms = 1e-3
    rows = []
    for rank in range(6):
        slow = rank in (4, 5)
        fwd, bwd, opt = (5 * ms, 7 * ms, 1 * ms) if slow else (3 * ms, 7 * ms, 1 * ms)
        exposed = 1 * ms if slow else 2 * ms  # inside bwd, as a rank log's backward holds it
        rows += _steps(
            "a",
            rank,
            fwd_s=[fwd, fwd],
            bwd_s=[bwd + (0 if slow else 1 * ms), bwd + (0 if slow else 1 * ms)],
            opt_s=[opt, opt],
            comm_s=[5 * ms, 5 * ms],
            comm_exposed_s=[exposed, exposed],
            data_s=[1 * ms, 3 * ms],
            step_s=[16 * ms, 16 * ms + 2 * ms * (rank == 0)],
        )
    rows += _steps(
        "b", 0, fwd_s=[1.0], bwd_s=[1.0], opt_s=[1.0], comm_s=[0.0], comm_exposed_s=[0.0], data_s=[0.0], step_s=[3.0]
    )
    rows += _steps(
        "b", 1, fwd_s=[2.0], bwd_s=[1.0], opt_s=[1.0], comm_s=[0.0], comm_exposed_s=[0.0], data_s=[0.0], step_s=[4.0]
    )
    steps = pd.DataFrame(rows).assign(profiled=False)
    ranks = pd.DataFrame(
        [{"run_id": "a", "rank": r, "host": f"h{r // 2}", "local_rank": r % 2} for r in range(6)]
        + [{"run_id": "b", "rank": r, "host": "solo", "local_rank": r} for r in range(2)]
    )
    return steps, ranks


def test_host_times_by_hand(host_frames):
    steps, ranks = host_frames
    out = host_times(*host_frames).set_index("host")
    assert list(out["run_id"].unique()) == ["a"]  # b ran on one host
    assert list(out.index) == ["h0", "h1", "h2"]
    assert list(out["ranks"]) == ["0-1", "2-3", "4-5"] and list(out["num_ranks"]) == [2, 2, 2]
    # compute = fwd + bwd + opt - exposed: 3 + 8 + 1 - 2 = 10 ms on h0 and h1, 5 + 7 + 1 - 1 = 12 ms on h2
    assert out.loc["h0", "compute_ms_mean"] == pytest.approx(10.0)
    assert out.loc["h2", "compute_ms_mean"] == pytest.approx(12.0)
    assert out.loc["h2", "compute_slowdown_pct"] == pytest.approx(20.0)  # against the median host, 10 ms
    assert out.loc["h0", "compute_slowdown_pct"] == pytest.approx(0.0)
    # h0: rank 0's steps 16 and 18 ms, rank 1's 16 and 16: mean 16.5, p95 of 16 16 16 18 at 2.85 -> 17.7
    assert out.loc["h0", "step_ms_mean"] == pytest.approx(16.5) and out.loc["h0", "step_ms_p95"] == pytest.approx(17.7)
    assert out.loc["h1", "step_ms_mean"] == pytest.approx(16.0)
    assert out.loc["h2", "comm_exposed_ms_mean"] == pytest.approx(1.0) and out.loc[
        "h1", "comm_ms_mean"
    ] == pytest.approx(5.0)
    assert out.loc["h2", "data_ms_mean"] == pytest.approx(2.0)
    assert out.loc["h2", "fwd_ms_mean"] == pytest.approx(5.0) and out.loc["h0", "fwd_ms_mean"] == pytest.approx(3.0)
    assert list(out["straggler"]) == [False, False, True]  # 20% and 2 ms slower: over 5% and 1 ms
    # both must hold: 20% but not 2.5 ms, 2 ms but not 25%
    assert not host_times(steps, ranks, min_gap_ms=2.5)["straggler"].any()
    assert not host_times(steps, ranks, threshold_pct=25.0)["straggler"].any()
    slow = slow_hosts(host_times(steps, ranks))
    assert slow[["run_id", "host", "ranks"]].values.tolist() == [["a", "h2", "4-5"]]


def test_nodes_that_share_a_host_name_are_told_apart(host_frames):
    """Containers and network namespaces share the machine's name: the launcher's node tells them apart; a
    header without a node (older runs) keeps the host name alone."""
    steps, ranks = host_frames
    shared = ranks.assign(host="box", node=ranks["rank"] // 2)
    out = host_times(steps, shared)
    assert list(out["host"]) == ["box (node 0)", "box (node 1)", "box (node 2)"]
    assert list(out["straggler"]) == [False, False, True]
    assert list(host_times(steps, ranks.assign(node=pd.NA))["host"]) == ["h0", "h1", "h2"]


def test_no_hosts_no_rows(host_frames):
    steps, ranks = host_frames
    assert host_times(steps, ranks[ranks["run_id"] == "b"]).empty
    assert host_times(steps, ranks.assign(host=None)).empty  # headers without a host
    assert host_times(steps.iloc[:0], ranks).empty
    assert _rank_ranges([8, 0, 1, 2, 3, 10, 11]) == "0-3, 8, 10-11"


def test_the_report_names_exactly_the_slow_host(tmp_path):
    cells = [
        SynthCell("ddp", "dali", "resnet50", 12, 3, slow_host=1),  # jwb0257's ranks 4-7 compute 1.3 x slower
        SynthCell("ddp", "dali", "resnet50", 8, 2),  # two hosts, none slow
        SynthCell("ddp", "native", "resnet50", 4, 1),  # one host
    ]
    write_campaign(tmp_path / "runs", cells, steps=40, warmup_steps=4, commbench=False)
    campaign = load_campaign(tmp_path / "runs")
    assert sorted(campaign.ranks.groupby("run_id")["host"].nunique()) == [1, 2, 3]
    hosts = host_times(campaign.steps, campaign.ranks)
    assert hosts[hosts["straggler"]][["host", "ranks"]].values.tolist() == [["jwb0257", "4-7"]]
    slow_run = hosts[hosts["run_id"].str.contains("slow1")]
    assert slow_run.set_index("host")["compute_slowdown_pct"]["jwb0257"] > 20  # 1.3 x against the median host
    assert slow_run["step_ms_mean"].max() - slow_run["step_ms_mean"].min() < 1e-6  # synchronous: equal steps

    build_report(tmp_path / "runs", tmp_path / "rep", formats=("png",), jobs=1)
    text = (tmp_path / "rep" / "report.md").read_text()
    section = text.split("## Hosts", 1)[1].split("\n## ", 1)[0]
    named = next(line for line in section.splitlines() if line.startswith("Slow hosts:"))
    assert re.findall(r"jwb\d+", named) == ["jwb0257"] and "(ranks 4-7)" in named
    table = [line for line in section.splitlines() if line.startswith("| synth/")]
    assert [line.split(" | ")[1] for line in table if line.rstrip().endswith("| slow |")] == ["jwb0257"]
    assert len(table) == 5  # the hosts of the two multi-host runs; the one-host run has none
    assert (tmp_path / "rep" / "figures" / "hosts.png").is_file()
    assert "<h2>Hosts</h2>" in (tmp_path / "rep" / "report.html").read_text()


def test_runs_on_one_host_show_no_hosts_section(tmp_path):
    write_campaign(tmp_path / "runs", [SynthCell("ddp", "dali", "resnet50", 4, 1)], steps=20, warmup_steps=2)
    blocks, figures = assemble(load_campaign(tmp_path / "runs"))
    assert "Hosts" not in [b.content for b in blocks if b.kind == "heading"] and "hosts" not in figures


# --- the CPU study end to end ---------------------------------------------------------------------------


@pytest.mark.slow
def test_the_cpu_study_runs_here_and_reports(tmp_path, ddlbench):
    """`campaign run experiment=composable_2023_cpu` on tiny sizes: DDP (the baseline), DDP with the ZeRO
    optimizer, FSDP2 and DeepSpeed ZeRO-2 on 2 gloo ranks, ResNet-18 at 32 px, fp32 only (a cell is mostly its
    ranks' start-up: 4 cells keep this under 90 s; AMP's cells are the tests above's); then the report's
    comparison section. Slow (52 s on the CI machine): four cells, the study end to end."""
    study = [
        "experiment=composable_2023_cpu",
        f"run.root={tmp_path}/runs",
        "campaign.axes.model=[resnet]",
        "campaign.axes.precision=[fp32]",
        "run.per_gpu_batch=2",
        "run.warmup_steps=1",
        "run.steps=2",
    ]
    ran = ddlbench("campaign", "run", *study)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "ran 4 of 4 cell(s) here" in ran.stdout
    report = ddlbench("report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"), "--formats", "png")
    assert report.returncode == 0, report.stderr[-2000:]
    text = (tmp_path / "report" / "report.md").read_text()
    section = text.split("## Modes and precisions", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| resnet18")]
    assert len(rows) == 4
    modes = [(line.split(" | ")[5], line.split(" | ")[7]) for line in rows]
    assert modes == [
        ("ddp", "framework.zero_optimizer=False"),
        ("ddp", "framework.zero_optimizer=True"),
        ("fsdp", ""),
        ("deepspeed ZeRO-2", ""),
    ]
    baseline = [line for line in rows if "| ddp | fp32 | framework.zero_optimizer=False |" in line]
    assert len(baseline) == 1 and baseline[0].rstrip().endswith("| 1.0 |")
