"""Seed study C: deep-learning workloads on a composable system (GPUs behind a PCIe switch, the Falcon
drawer, against NVLink-connected local GPUs), and its software comparison (DP, DDP, AMP, sharded)."""

from __future__ import annotations

import pandas as pd

from analysis.cells import CELL, MEMORY, peak_memory, with_sample_unit
from analysis.compare import across_systems
from analysis.device import GPU, rank_words, run_devices, with_device
from analysis.figures import distinct_labels, shared_parts
from analysis.interconnect import p2p_heatmap
from analysis.modes import (
    MODE_BASELINE_TEXT,
    MODES,
    ZERO_OPTIMIZER,
    group_settings,
    mode_bars,
    mode_cells,
    mode_name,
    precision_name,
)
from analysis.papers import figures
from analysis.papers.base import Exhibit, PaperInput, Section, Study
from analysis.papers.common import guesses_table, software_stack
from analysis.telemetry import telemetry_timeline
from analysis.utilisation import UTILISATION, utilisation_bars

CAMPAIGN = "ddlbench campaign submit experiment=composable_2023 system=<profile> system.account=<project>"
CPU = "ddlbench campaign run experiment=composable_2023_cpu (the CPU miniature)"
SYSTEMS = (
    "ddlbench campaign submit experiment=composable_2023 system=<each profile: local, switched, hybrid GPUs>; "
    "then ddlbench paper composable2023 RUNS --baseline system=<local profile>"
)
NOT_IN_TEXT = (
    "the study's numbering implies it, but the text we hold never cites it, so what it shows is unknown "
    "(analysis/reference/exhibits.csv)"
)
HARDWARE = (
    "a diagram of the study's hardware (a host with NVLink GPUs and two PCIe-switch drawers); each run here "
    "records its own GPU topology (`nvidia-smi topo -m`, meta.json), and Table IV's measured matrix is that topology's cost"
)


def configurations(paper: PaperInput) -> Section:
    section = Section()
    runs = paper.analysis.counted()
    section.says(paper, "configurations", "pcie_generation_falcon")
    section.text(
        "Measured: the system profiles these runs used, each a configuration; `--baseline system=<profile>` picks "
        "the one the relative times are against."
    )
    if "config.system.name" in runs:
        table = (
            runs.groupby("config.system.name")
            .agg(runs=("run_id", "size"), gpus_per_node=("config.system.ranks_per_node", "max"))
            .reset_index()
            .rename(columns={"config.system.name": "system profile"})
        )
        section.table(table)
    return section


def relative_time(paper: PaperInput) -> Section:
    section = Section()
    baseline = paper.baseline.get("system")
    section.says(
        paper,
        "slowdown_pct_mobilenetv2_resnet50_falcon",
        "slowdown_pct_vision_falcon",
        "relative_time_bert_large_falcon",
    )
    section.text(
        "Measured: cells that differ only in their system profile, each configuration's time against its run on the "
        "baseline system (the baseline's throughput over the cell's: above 1 is slower)."
    )
    if not baseline:
        section.lacks("relative time: a baseline system (--baseline system=<profile>)", SYSTEMS)
        return section
    table = across_systems(paper.analysis.cells(), paper.analysis.counted(), baseline=baseline)
    if table.empty or table["system"].nunique() < 2:
        section.lacks(
            f"relative time: the same configurations on {baseline} and at least one other system profile", SYSTEMS
        )
        if table.empty:
            return section
    systems = table.groupby("configuration")["system"].transform("nunique")
    paired = table[systems > 1].copy()
    paired["variant"] = (
        paired["variant"]
        .fillna("")
        .map(lambda v: ", ".join(p for p in v.split(", ") if p and not p.startswith("system.")))
    )
    shown = ["model", "framework", "precision", "variant", "world_size", "system", "throughput_img_s", "relative_time"]
    section.table(paired.sort_values(["model", "framework", "precision", "variant", "system"])[shown].round(3))
    if set(run_devices(paper.analysis.counted())) != {GPU}:
        section.drawn_without(
            "switched and hybrid GPUs: these runs are CPU ranks under two profile names on one machine, an A/A "
            "comparison whose relative times show the comparison's noise floor"
        )
    alone = int((systems == 1).sum())
    if alone:
        section.text(
            f"{alone} cell(s) ran on one system profile only (no partner: another setting differs, or the "
            "configuration did not run on the other system); they are left out of the table."
        )
    # the study's bounds as relative times: "less than 5%" slower is at most 1.05
    published = {
        "mobilenet_v2": 1 + paper.claim("slowdown_pct_mobilenetv2_resnet50_falcon") / 100,
        "resnet50": 1 + paper.claim("slowdown_pct_mobilenetv2_resnet50_falcon") / 100,
        "bert_large": paper.claim("relative_time_bert_large_falcon"),
    }
    shown = paired.dropna(subset=["relative_time"])
    shown = shown[shown["system"] != baseline]
    parts = [
        [
            str(row.model),
            mode_name(str(row.framework), str(row.framework), variant)
            + precision_name(str(row.precision), set(shown["precision"].astype(str))),
            *(p for p in variant if not p.startswith(f"{ZERO_OPTIMIZER}=")),
            f"on {row.system}",
        ]
        for row, variant in zip(
            shown.itertuples(index=False), shown["variant"].map(lambda v: [p for p in v.split(", ") if p])
        )
    ]
    shared = shared_parts(parts)  # what every bar has: said once, in the title
    shown = shown.assign(label=distinct_labels(parts), published=shown["model"].map(published))
    what = f" ({', '.join(shared)})" if shared else ""
    if not shown.empty:
        section.figure(
            "relative",
            lambda: figures.beside_published(
                shown,
                label="label",
                value="relative_time",
                published="published",
                unit=f"time relative to {baseline}",
                title=f"Training time relative to the baseline system{what}",
            ),
            f"Training time relative to {baseline} (measured) beside the study's bounds (published: the most it states).",
        )
    return section


def utilisation(paper: PaperInput) -> Section:
    section = Section()
    table = with_device(paper.analysis.utilisation(), paper.analysis.counted())
    section.says(paper, "gpu_util_pct_min", "falcon_utilisation_higher")
    section.text("Measured: the telemetry means and peaks per cell, whole run.")
    if table.empty:
        section.lacks("utilisation: runs with telemetry (run.telemetry_hz > 0)", CAMPAIGN)
        return section
    if not any(c.startswith("gpu_") and table[c].notna().any() for c in table):
        section.drawn_without(
            "GPU utilisation, GPU memory utilisation and memory-access time (these runs are on CPU ranks: "
            "host CPU % and memory only)"
        )
    shown = [c for c in [*CELL, "variant", *UTILISATION] if c in table and table[c].notna().any()]
    section.table(table[shown].round(1))  # cell_labels name the ranks for their device
    section.figure(
        "utilisation",
        lambda: utilisation_bars(table),
        "Utilisation per cell (measured; the study's only value, 'higher than 80%', is quoted above).",
    )
    return section


def gpu_memory(paper: PaperInput) -> Section:
    """The text's GPU memory: 16 GB per V100, BERT's need of it; beside each GPU cell's peak (summary.json)."""
    section = Section()
    section.says(paper, "gpu_memory_gb_falcon_v100", "bert_memory", "memory_bound")
    counted = paper.analysis.counted()
    cells = with_device(paper.analysis.cells(), counted)
    memory = peak_memory(counted) if "cell_hash" in counted else pd.DataFrame()
    table = cells.merge(memory, on="cell_hash") if not memory.empty and not cells.empty else pd.DataFrame()
    if not table.empty:
        table = table[table["device"] == GPU].dropna(subset=[MEMORY[0]])
    section.text(
        "Measured: each GPU cell's peak GPU memory (torch's peak allocated and reserved, summary.json) beside the "
        f"study's {paper.claim('gpu_memory_gb_falcon_v100'):g} GB per V100 (published)."
    )
    if table.empty:
        section.lacks("GPU memory: cells on GPUs (these runs are on CPU ranks, which record no GPU memory)", CAMPAIGN)
        return section
    shown = [c for c in ["model", "world_size", "framework", "precision", "per_gpu_batch", *MEMORY] if c in table]
    out = table[shown].copy()
    out["GPU memory GB (published, V100)"] = paper.claim("gpu_memory_gb_falcon_v100")
    section.table(out.round(2))
    return section


def memory_access(paper: PaperInput) -> Section:
    section = Section()
    section.says(paper, "memory_access_measured", "falcon_utilisation_higher")
    section.text_only(
        "the share of time spent accessing GPU memory (NVML's memory utilisation); this suite's telemetry records "
        "GPU utilisation and GPU memory used, not that share"
    )
    return section


def timeline(paper: PaperInput) -> Section:
    section = Section()
    telemetry = paper.analysis.campaign.telemetry
    section.says(paper, "utilisation_drops")
    section.text("Measured: the telemetry timeline of the run with the most ranks.")
    if telemetry.empty or "t_s" not in telemetry:
        section.lacks("utilisation over time: runs with telemetry", CAMPAIGN)
        return section
    runs = paper.analysis.counted()
    sizes = runs.set_index("run_id")["world_size"] if "world_size" in runs else pd.Series(dtype=float)
    run_id = sorted(telemetry["run_id"].unique(), key=lambda r: (-float(sizes.get(r, 0) or 0), r))[0]
    section.figure(
        "timeline", lambda: telemetry_timeline(telemetry, run_id=run_id), f"Telemetry of {run_id} (measured)."
    )
    if set(run_devices(runs)) != {GPU}:
        section.drawn_without("GPU utilisation over the run (these runs are on CPU ranks: host telemetry only)")
    return section


def pcie_traffic(paper: PaperInput) -> Section:
    section = Section()
    table = paper.analysis.utilisation()
    published = pd.DataFrame(
        [
            {"model": model, "PCIe GB/s, falconGPUs (published)": paper.claims.set_index("key").at[key, "value"]}
            for model, key in (
                ("bert_large", "pcie_traffic_gb_s_bert_large_falcon"),
                ("resnet50", "pcie_traffic_gb_s_resnet50_falcon"),
                ("mobilenet_v2", "pcie_traffic_gb_s_mobilenetv2_falcon"),
            )
        ]
    )
    section.says(paper, "pcie_traffic_gb_s_bert_large_falcon", "pcie_traffic_gb_s_mobilenetv2_falcon")
    section.text("Measured: each cell's mean PCIe rx + tx per GPU (NVML).")
    section.table(published)
    rx = table["pcie_rx_gb_s_mean"] if "pcie_rx_gb_s_mean" in table else pd.Series(dtype=float)
    if rx.notna().sum() == 0:
        section.lacks("PCIe traffic: GPU runs with telemetry (NVML's PCIe counters; CPU runs have none)", CAMPAIGN)
        return section
    measured = table.assign(pcie_gb_s=table["pcie_rx_gb_s_mean"] + table.get("pcie_tx_gb_s_mean", 0))
    keep = [c for c in ("model", "framework", "precision", "variant", "world_size", "pcie_gb_s") if c in measured]
    section.table(measured.dropna(subset=["pcie_gb_s"])[keep].round(2))
    return section


def host_usage(paper: PaperInput) -> Section:
    section = Section()
    table = with_device(paper.analysis.utilisation(), paper.analysis.counted())
    section.says(paper, "host_not_stressed", "vision_uses_cpu")
    section.text("Measured: host CPU % and host memory peak per cell (psutil, one rank per host).")
    keep = [c for c in ("cpu_pct_mean", "host_mem_used_gb_peak") if c in table]
    if table.empty or not keep:
        section.lacks("host CPU and memory: runs with telemetry", CAMPAIGN)
        return section
    section.table(table[[c for c in [*CELL, "variant", *keep] if c in table]].round(1))
    return section


def p2p(paper: PaperInput) -> Section:
    section = Section()
    matrix = paper.analysis.p2p_matrix()
    section.says(paper, "bandwidth_ratio_ll_vs_fl")
    section.text("Measured: `ddlbench commbench`'s P2P copy matrix per GPU pair.")
    if matrix.empty:
        section.lacks(
            "GPU-to-GPU matrix: a commbench run on the GPU machine",
            "ddlbench commbench --nproc <GPUs per node> (it writes runs/commbench/, which the paper reads)",
        )
        return section
    section.table(matrix.round(2))
    section.figure("p2p", lambda: p2p_heatmap(matrix), "P2P bandwidth per GPU pair (measured).")
    return section


def amp_speedups(table: pd.DataFrame) -> pd.DataFrame:
    """Per model, mode and variant with an fp32 cell and a mixed-precision one: the AMP cell's throughput
    over the fp32 cell's, less 1, in %."""
    if table.empty or "precision" not in table:
        return pd.DataFrame()
    key = [c for c in ("model", "world_size", "mode", "variant") if c in table]
    wide = table.pivot_table(index=key, columns="precision", values="samples_s", aggfunc="first")
    if "fp32" not in wide:
        return pd.DataFrame()
    out = []
    for amp in [c for c in wide.columns if c.startswith("amp")]:
        pct = 100 * (wide[amp] / wide["fp32"] - 1)
        out.append(pct.rename(f"{amp} speedup % (measured)"))
    if not out:
        return pd.DataFrame()
    frame = pd.concat(out, axis=1).dropna(how="all").reset_index()
    frame["published"] = "> 50%"
    return frame


def modes(paper: PaperInput) -> Section:
    section = Section()
    cells = with_sample_unit(paper.analysis.cells(), paper.analysis.counted())
    counted = paper.analysis.counted()
    table = mode_cells(cells, counted, utilisation=paper.analysis.utilisation(), memory=peak_memory(counted))
    section.says(
        paper,
        "num_nodes_data_parallel",
        "speedup_pct_mixed_precision_min",
        "speedup_pct_ddp_over_dp_local",
        "batch_size_bert_large_unsharded",
    )
    section.text(
        "Measured: each mode and precision's training time relative to DDP in full precision "
        f"({MODE_BASELINE_TEXT}), per model."
    )
    if table.empty:
        section.lacks("software comparison: the mode x precision cells", CAMPAIGN)
        section.commands.append(CPU)
        return section
    shown = [
        c
        for c in ["model", "world_size", "mode", "precision", "variant", *MODES]
        if c in table and table[c].notna().any()
    ]
    section.table(table[shown].round(3))
    for k, (_, rows) in enumerate(table.groupby("mode_group", sort=False)):
        title = f"{rows['model'].iloc[0]}, {rank_words(rows['device']).count(rows['world_size'].iloc[0])}"
        title += "".join(f", {setting}" for setting in group_settings(rows))
        section.figure(
            f"modes_{k}",
            lambda rows=rows, title=title: mode_bars(rows, title=title),
            f"Modes and precisions, {title} (measured; the study's bounds, quoted above, are not plotted).",
        )
    speedups = amp_speedups(table)
    if not speedups.empty:
        section.text(
            "Mixed precision against full precision, each mode alone: the speedup in % of the fp32 cell's "
            "throughput, beside the study's 'more than 50% in all cases' (quoted above)."
        )
        section.table(speedups.round(1))
    if not table["model"].astype(str).str.contains("bert").any():
        section.lacks("software comparison of BERT (the study's model for it)", CAMPAIGN)
    guesses = guesses_table(paper.analysis)
    if not guesses.empty:
        section.text("Where the experiment had to guess (experiment.guesses):")
        section.table(guesses)
    return section


def stack(paper: PaperInput) -> Section:
    section = Section()
    section.text("Published: the study's software stack (its Table I); measured: what these runs recorded (meta.json).")
    section.table(software_stack(paper, ["torch", "cuda", "cudnn", "nccl", "python"]))
    return section


STUDY = Study(
    name="composable2023",
    title="Deep-learning workloads on a composable (PCIe-switched) GPU system, 2023",
    campaigns=("composable_2023", "composable_2023_cpu"),
    commands=(CAMPAIGN, CPU, SYSTEMS),
    exhibits=(
        *(Exhibit(f"Figure {k}", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT) for k in range(1, 6)),
        Exhibit("Figure 6", "Topology of the system used", (), why_not=HARDWARE),
        Exhibit("Figure 7", "Hybrid cube-mesh NVLink topology of the host", (), why_not=HARDWARE),
        Exhibit("Table I", "Software stack", ("measured", "published"), stack),
        Exhibit("Figure 8", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit("Figure 9", "GPU utilisation over the training runs", ("measured",), timeline),
        Exhibit("Table II", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit("Table III", "System configurations", ("measured", "published"), configurations),
        Exhibit("Table IV", "GPU-to-GPU latency and bandwidth", ("measured", "published"), p2p),
        Exhibit(
            "Figure 10", "GPU utilisation, memory utilisation and access time", ("measured", "published"), utilisation
        ),
        Exhibit("Figure 11", "Training time relative to local GPUs", ("measured", "published"), relative_time),
        Exhibit("Figure 12", "PCIe traffic of the switched GPUs", ("measured", "published"), pcie_traffic),
        Exhibit("Figure 13", "CPU utilisation", ("measured", "published"), host_usage),
        Exhibit("Figure 14", "Host memory utilisation", ("measured", "published"), host_usage),
        Exhibit("Figure 15", "(not cited in the text we have)", (), why_not=NOT_IN_TEXT),
        Exhibit(
            "Figure 16",
            "NVMe behind the switch vs local NVMe",
            (),
            why_not=(
                "storage behind a PCIe switch is hardware this suite cannot place; on yours, make one system profile "
                "per storage placement (data.path on each) and read Figure 11's section with --baseline system=<local>"
            ),
        ),
        Exhibit(
            "Figure (software optimizations)", "DP, DDP, AMP and sharded training", ("measured", "published"), modes
        ),
        Exhibit(
            "GPU memory use",
            "GPU memory per model and mode (text)",
            ("measured", "published"),
            gpu_memory,
            from_text=True,
        ),
        Exhibit(
            "GPU memory-access time",
            "Share of time spent accessing GPU memory (text)",
            ("published",),
            memory_access,
            from_text=True,
        ),
    ),
)
