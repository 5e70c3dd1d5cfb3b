"""`ddlbench report` and `ddlbench compare`: assemble tables (metrics.py) and figures (plots.py) into a
markdown + static HTML report. Nothing is computed or drawn here; this module only puts things together
and writes files.
"""

from __future__ import annotations

import html
import json
import multiprocessing
import os
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

from analysis import metrics, plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.load import Campaign, export_parquet, load_campaign, load_reference
from analysis.palette import PAPER_RC
from benchmarks.errors import ConfigError

FORMATS = ("png", "svg", "pdf")
MAX_TELEMETRY_FIGURES = 2  # a timeline per run: a few are readable, hundreds are not


@dataclass(slots=True)
class Block:
    """One piece of the report: a heading, a paragraph, a table or a figure. A table may carry `note`, how
    its figures are computed (paragraphs apart by a blank line: folded under the table in HTML, under it
    in markdown), and `key`, the columns the HTML shows first: the figures a reader came for."""

    kind: str  # heading | text | table | figure
    content: object
    level: int = 2
    note: str = ""
    key: tuple[str, ...] = ()


def _fresh_dir(out: Path, option: str = "--out") -> Path:
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"{option} {out} already exists and is not empty (a report is never overwritten); "
            f"pass a new folder, e.g. {option} {out}-2"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (float, np.floating)):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:,.1f}"
    return str(value)


def markdown_table(frame: pd.DataFrame, *, labels: dict[str, str] | None = None) -> str:
    """A GitHub-markdown table (no tabulate dependency); long variants as labels (variant_labels: `labels`,
    or numbered here), spelled out under the table."""
    if frame.empty:
        return "_none_"
    labels = variant_labels([frame]) if labels is None else labels
    named = _named(frame, labels)
    if named:
        frame = frame.assign(variant=frame["variant"].map(lambda v: named.get(_fmt(v), "")))
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "| " + " | ".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) else "---" for c in frame.columns) + " |"
    body = [
        "| " + " | ".join(_fmt(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    legend = [f"{VARIANT_LEGEND}:", *(f"- {label}: {text}" for text, label in named.items())] if named else []
    return "\n".join([head, rule, *body]) + ("\n\n" + "\n".join(legend) if legend else "")


VARIANT_CHARS = 40  # a longer variant (several swept settings) would make every table it is in wide: a label
VARIANT_LEGEND = "variant: the settings that tell apart cells that look alike"


def variant_labels(frames: list[pd.DataFrame]) -> dict[str, str]:
    """{variant: v1, v2, ...} over the tables' distinct variants in the order they first appear, when one of
    them is longer than VARIANT_CHARS; {} when each is short enough to read in its column."""
    texts = dict.fromkeys(v for frame in frames if "variant" in frame for v in frame["variant"].map(_fmt) if v)
    if not any(len(v) > VARIANT_CHARS for v in texts):
        return {}
    return {v: f"v{i}" for i, v in enumerate(texts, 1)}


def _named(frame: pd.DataFrame, labels: dict[str, str]) -> dict[str, str]:
    """{variant: its label} of the variants this table shows, where they are labelled."""
    if not labels or "variant" not in frame:
        return {}
    return {v: labels[v] for v in frame["variant"].map(_fmt) if v in labels}


# how a column name reads as a header (the markdown keeps the names): rates anywhere, units at the end
_HEADER_RATES = (("_img_s", "_img/s"), ("_seq_s", "_seq/s"), ("_gb_s", "_GB/s"))
_HEADER_UNITS = (("_pct", " %"), ("_ms", " ms"), ("_gib", " GiB"), ("_s", " s"), ("_pp", " pp"))
_HEADER_WORDS = {"gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "ci": "CI", "h2d": "H2D"}


def header(column: object) -> str:
    """A column name as a table header: per_gpu_img_s -> 'per GPU img/s', allreduce_pct -> 'allreduce %'."""
    text, unit = str(column), ""
    for rate, shown in _HEADER_RATES:
        text = text.replace(rate, shown)
    for suffix, shown in _HEADER_UNITS:
        if text.endswith(suffix) and len(text) > len(suffix):
            text, unit = text[: -len(suffix)], shown
            break
    return " ".join(_HEADER_WORDS.get(w, w) for w in text.split("_")) + unit


def html_table(
    frame: pd.DataFrame, *, key: tuple[str, ...] = (), note: str = "", labels: dict[str, str] | None = None
) -> str:
    """A table that scrolls inside its own box when it is wider than the page; numbers right, text left.
    The `key` columns come first, so that the figure a reader came for is on screen without scrolling
    sideways; then the others in the frame's order, and `variant` last: where long, a label (variant_labels:
    `labels`, or numbered here) with its settings on hover. What each label stands for and `note`, how the
    figures are computed, fold under the table ("How this is computed")."""
    first = [c for c in key if c in frame]
    variant = ["variant"] if "variant" in frame else []
    frame = frame[[*first, *(c for c in frame if c not in first and c not in variant), *variant]]
    named = _named(frame, variant_labels([frame]) if labels is None else labels)
    fold = [f"<p>{html.escape(p)}</p>" for p in note.split("\n\n") if p.strip()]
    if named:
        fold.insert(
            0,
            f"<p>{VARIANT_LEGEND} (a label shows them on hover):</p><ul>"
            + "".join(f"<li>{label}: {html.escape(text)}</li>" for text, label in named.items())
            + "</ul>",
        )
    summary = "How this is computed" if note.strip() else "The variants' settings"
    if note.strip() and named:
        summary += ", and the variants' settings"
    details = f"<details><summary>{summary}</summary>{''.join(fold)}</details>" if fold else ""
    if frame.empty:
        return "<p><em>none</em></p>" + details
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]) for c in frame.columns
    ]
    # the key columns' class, the last of them ruled off from the rest
    key_class = [
        ("key key-end" if i == len(first) - 1 else "key") if i < len(first) else "" for i in range(len(numeric))
    ]
    head = "".join(
        "<th" + (f' class="{k}"' if k else "") + f' title="{html.escape(str(c))}">{html.escape(header(c))}</th>'
        for c, k in zip(frame.columns, key_class)
    )

    def cell(value: object, column: object, number: bool, k: str) -> str:
        text = _fmt(value)
        if column == "variant" and text in named:
            return f'<td class="txt variant" title="{html.escape(text)}">{named[text]}</td>'
        return f'<td class="{" ".join(filter(None, ["num" if number else "txt", k]))}">{html.escape(text)}</td>'

    rows = "".join(
        "<tr>" + "".join(cell(*x) for x in zip(row, frame.columns, numeric, key_class)) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>' + details


def _percent(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    for column in columns:
        if column in frame:
            frame[column] = (100 * frame[column].astype("float64")).round(1)
    return frame


# --- what ran, on what ---------------------------------------------------------------------------


# a torch build's CUDA (and, where a GPU is visible, NCCL) versions: facts of runs on GPUs only
GPU_PROVENANCE = ("meta.hardware.cuda", "meta.hardware.nccl")


def _on_gpu(runs: pd.DataFrame) -> pd.Series:
    """Which runs ran on GPUs: system.device=cuda (a CPU run on a GPU host is a CPU run); where no device
    is recorded, those whose meta.json lists GPUs."""
    none = pd.Series(pd.NA, index=runs.index, dtype="object")
    device = runs.get("config.system.device", none)
    gpus = runs.get("meta.hardware.gpus", none).astype(str).str.lower()
    return device.astype(str).eq("cuda").where(device.notna(), ~gpus.isin(["none", "[]", "", "null", "nan", "<na>"]))


def _provenance(runs: pd.DataFrame) -> pd.DataFrame:
    """Distinct values of the provenance columns (meta.json) over all runs; CUDA and NCCL over GPU runs."""
    rows = []
    wanted = [
        "meta.hardware.gpus",
        "meta.hardware.host",
        "meta.hardware.cuda",
        "meta.hardware.nccl",
        "meta.hardware.platform",
        "meta.launcher",
        "meta.git_sha",
        "meta.git_dirty",
    ]
    wanted += sorted(c for c in runs.columns if c.startswith("meta.versions."))
    for column in wanted:
        if column not in runs:
            continue
        values = (runs.loc[_on_gpu(runs), column] if column in GPU_PROVENANCE else runs[column]).dropna().astype(str)
        values = values[~values.str.lower().isin(["none", "[]", "", "null"])]
        if values.empty:
            continue
        counts = values.value_counts()
        shown = ", ".join(f"{_short(v)} ({n})" if len(counts) > 1 else _short(v) for v, n in counts.head(6).items())
        if len(counts) > 6:
            shown += f", ... ({len(counts)} distinct)"
        rows.append({"what": column.removeprefix("meta."), "value (runs)": shown})
    if "meta.started" in runs and runs["meta.started"].notna().any():
        started = runs["meta.started"].dropna().astype(str)
        rows.append({"what": "started", "value (runs)": f"{started.min()} .. {started.max()}"})
    return pd.DataFrame(rows, columns=["what", "value (runs)"])


def _short(value: str) -> str:
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        parsed = value
    if isinstance(parsed, str) and len(parsed) == 40 and all(c in "0123456789abcdef" for c in parsed):
        return parsed[:12]  # a git sha
    if isinstance(parsed, list):
        distinct = sorted({str(v) for v in parsed})
        return " + ".join(f"{v} x{parsed.count(v)}" if parsed.count(v) > 1 else v for v in distinct)
    return str(value)


# --- assembling --------------------------------------------------------------------------------


def _table_if_rows(
    blocks: list[Block], table: pd.DataFrame, note: str, *, title: str = "", key: tuple[str, ...] = ()
) -> None:
    """When the table has rows: its title (a third-level heading), then the table (rounded to 0.1) with
    the note that explains it."""
    if not table.empty:
        if title:
            blocks.append(Block("heading", title, 3))
        blocks.append(Block("table", table.round(1), note=note, key=key))


def _figure(blocks: list[Block], figures: dict, name: str, draw, caption: str) -> None:
    """Register a figure: `draw` is called later (maybe in a worker process) and returns the Figure."""
    figures[name] = draw
    blocks.append(Block("figure", (name, caption)))


# the columns each table shows (the markdown's order: what `results` prints, what greps of report.md read) and
# its key figures, shown first in the HTML
SCALING_COLUMNS = [
    *metrics.CELL,
    "variant",
    "num_repeats",
    "throughput_img_s",
    "throughput_img_s_ci_low",
    "throughput_img_s_ci_high",
    "per_gpu_img_s",
    "efficiency",
    "baseline_gpus",
    *metrics.MEMORY,
]
SCALING_KEY = ("throughput_img_s", "per_gpu_img_s", "efficiency_pct")  # named in each table's unit (_in_unit)


def _with_memory(cells: pd.DataFrame, counted: pd.DataFrame) -> pd.DataFrame:
    """cells with each cell's peak GPU memory in GiB (metrics.peak_memory); '-' where none was measured (CPU)."""
    if "cell_hash" not in cells:
        return cells
    out = cells.merge(metrics.peak_memory(counted), on="cell_hash", how="left")
    for column in metrics.MEMORY:
        out[column] = out[column].astype(object).where(out[column].notna(), "-")
    return out


def _in_unit(frame: pd.DataFrame, unit: str) -> pd.DataFrame:
    """A table of one sample unit with its throughput columns named in it: *_img_s become *_seq_s for
    sequences (metrics.rate_suffix); the metrics keep the _img_s names whatever the unit."""
    suffix = metrics.rate_suffix(unit)
    return frame.rename(columns={c: c.replace("_img_s", suffix) for c in frame.columns if "_img_s" in c})


def _shown(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The columns a table shows; `variant` only where some cell has one."""
    keep = [c for c in columns if c in frame and (c != "variant" or frame[c].astype(bool).any())]
    return frame[keep]


def assemble(
    campaign: Campaign,
    *,
    reference: pd.DataFrame | None = None,
    reference_name: str | None = None,
    scaling: str = "weak",
    analysis: CampaignAnalysis | None = None,
) -> tuple[list[Block], dict]:
    """(report blocks, {figure name: Figure}) for one campaign; `analysis`: the campaign's, where the caller
    keeps one (its tables are computed once)."""
    analysis = analysis if analysis is not None else CampaignAnalysis(campaign.root, campaign=campaign)
    runs, counted, excluded = campaign.runs, analysis.counted(), analysis.excluded()
    blocks: list[Block] = [Block("heading", f"ddlbench report: {campaign.root}", 1)]
    blocks.append(
        Block(
            "text",
            (
                f"{len(runs)} run directories, {len(counted)} counted, {len(excluded)} excluded; "
                f"{len(campaign.steps):,} step records from {campaign.steps['run_id'].nunique() if len(campaign.steps) else 0} "
                f"runs; {len(campaign.problems)} skipped lines or files. Throughput is recomputed from the rank logs: "
                "per measured step (not warm-up, not profiled) the slowest rank's step_s, throughput_img_s = global "
                "samples / their sum (the figure summary.json, `ddlbench results` and `compare` give). A cell is one "
                "configuration: runs are repeats only when every setting is equal; `variant` names the settings that "
                "tell apart cells that look alike. Repeats: median, and a 95% Student-t confidence interval of the "
                "mean (ci_low..ci_high)."
            ),
        )
    )
    figures: dict = {}

    blocks.append(Block("heading", "What was run, on what"))
    blocks.append(Block("table", _provenance(runs)))
    loaders = metrics.loader_settings(counted)
    if loaders["loader"].isin(["native", "native_gpu", "dali"]).any():
        blocks.append(Block("heading", "Loader settings", 3))
        blocks.append(
            Block(
                "table",
                loaders,
                note=(
                    "Each loader's settings (config.yaml): its CPU workers (native, native_gpu: DataLoader worker "
                    "processes; dali: threads) against the rank's CPUs (system.cpus_per_rank; the default gives every "
                    "loader the rank's CPUs less one), its queue depth, and its decoder."
                ),
            )
        )

    per_run = analysis.run_throughput()
    if not per_run.empty:
        cells = metrics.with_sample_unit(analysis.cells(), counted)
        scaled = metrics.with_sample_unit(analysis.scaling(scaling), counted)
        blocks.append(Block("heading", f"Throughput and {scaling} scaling"))
        note = (
            f"efficiency_pct: {scaling}-scaling efficiency against the same configuration on baseline_gpus GPUs, the "
            "smallest GPU count of its curve; empty where the curve has no smaller GPU count.\n\n"
            "peak_allocated_gib / peak_reserved_gib: the largest peak GPU memory over the cell's runs and ranks "
            "(torch.cuda.max_memory_allocated / max_memory_reserved over the whole run); '-' on CPU runs."
        )
        units = scaled.groupby("sample_unit", sort=True)
        for k, (unit, rows) in enumerate(units, 1):
            if scaled["sample_unit"].nunique() > 1:
                blocks.append(Block("text", f"Models whose samples are {unit} ({metrics.rate_label(unit)}):"))
            table = _percent(_shown(_with_memory(rows, counted), SCALING_COLUMNS), ["efficiency"])
            table = _in_unit(table.rename(columns={"efficiency": "efficiency_pct"}), unit)
            key = tuple(c.replace("_img_s", metrics.rate_suffix(unit)) for c in SCALING_KEY)
            blocks.append(Block("table", table, note=note if k == len(units) else "", key=key))
        _figure(
            blocks,
            figures,
            "throughput_vs_gpus",
            lambda: plots.throughput_vs_gpus(cells),
            "Throughput vs GPUs (log-log), one curve per configuration; dotted: ideal linear scaling from each "
            "curve's smallest GPU count.",
        )
        if scaled["efficiency"].notna().any():
            _figure(
                blocks,
                figures,
                "efficiency_vs_gpus",
                lambda: plots.efficiency_vs_gpus(scaled),
                f"{scaling.capitalize()}-scaling efficiency, one curve per configuration, against its smallest GPU count.",
            )
        if {"dali", "native"} <= set(cells["loader"]):
            _figure(
                blocks,
                figures,
                "dali_vs_native",
                lambda: plots.dali_vs_native(cells),
                "DALI throughput relative to the native loader (above 1: DALI faster).",
            )
        for unit, rows in cells.groupby("sample_unit", sort=True):  # one axis, one sample unit
            if rows["model"].nunique() > 1:
                _figure(
                    blocks,
                    figures,
                    "framework_by_depth" + ("" if unit == metrics.DEFAULT_SAMPLE_UNIT else f"_{unit}"),
                    lambda rows=rows: plots.framework_by_depth(rows),
                    f"Per-GPU throughput of each framework per model depth (hatched: DALI), models of {unit}.",
                )

        _modes_section(blocks, figures, analysis, cells)

        shares = analysis.breakdown()
        blocks.append(Block("heading", "Where the time goes"))
        blocks.append(
            Block(
                "table",
                _percent(_shown(shares, [*metrics.CELL, "variant", *metrics.SHARES]), metrics.SHARES).rename(
                    columns={c: c.replace("_share", "_pct") for c in metrics.SHARES}
                ),
                note=(
                    "Shares of step time over all ranks and measured steps: data (waiting for the next batch: the device on "
                    "GPUs, the host on CPUs), "
                    "compute (fwd + bwd + opt minus exposed allreduce), exposed allreduce, other (the rest). "
                    "allreduce_pct is the total allreduce time, overlapped or not; empty where the framework's "
                    "collectives are not timed. host_data_pct is the host's time blocked in the loader: on a GPU, "
                    "work queued ahead can hide a late batch from data_pct, not from host_data_pct."
                ),
                key=tuple(c.replace("_share", "_pct") for c in metrics.SHARES),
            )
        )
        _accuracy_section(blocks, figures, analysis)
        _trace_section(blocks, figures, analysis, reference)
        stability = analysis.step_stability()
        blocks.append(Block("heading", "Step-time stability (slowest rank per step)", 3))
        blocks.append(
            Block(
                "table",
                _shown(stability, [*metrics.CELL, "variant", *metrics.STABILITY]).round(1),
                note=(
                    f"Slow steps take more than {metrics.SLOW_STEP_FACTOR:g} x their run's median; slow_time_pct is "
                    "the time they took beyond the median, as a share of all step time (what the run would gain if "
                    "every step ran at its median)."
                ),
                key=tuple(metrics.STABILITY),
            )
        )
        _table_if_rows(
            blocks,
            analysis.rank_imbalance(),
            (
                "Per phase, the slowest rank's median against the fastest rank's (gaps of 1 ms "
                "or more). The ranks wait for each other in backward's all-reduce, so the first phase listed for "
                "a run points at the slow rank; a bwd gap after it is the others waiting."
            ),
            title="Ranks out of step",
            key=("gap_ms",),
        )
        _hosts_section(blocks, figures, analysis)
        _table_if_rows(
            blocks,
            analysis.loader_stalls(),
            (
                f"Runs whose host waited in the loader for at least "
                f"{metrics.LOADER_STALL_SHARE:.0%} of their step time (host_data_pct), against what the device saw "
                f"(data_pct); waiting_steps_pct counts the rank-steps that waited over "
                f"{metrics.LOADER_WAIT_FACTOR:.0%} of a median step. DALI on a GPU: check "
                f"CUDA_DEVICE_MAX_CONNECTIONS=32 (docs/dali.md); otherwise more loader threads or workers."
            ),
            title="Loader fell behind",
            key=("host_data_pct", "data_pct", "waiting_steps_pct"),
        )
        jittery = analysis.jittery_runs()
        if not jittery.empty:
            _figure(
                blocks,
                figures,
                "step_timeline",
                lambda: plots.step_timeline(jittery, slow_factor=metrics.SLOW_STEP_FACTOR),
                "Step time over the measured steps of the runs that lose the most time to slow steps.",
            )
        for model in plots._models(shares):
            _figure(
                blocks,
                figures,
                f"breakdown_{model}",
                lambda model=model: plots.breakdown_bars(shares, model=model),
                f"Time breakdown per GPU count, {model}.",
            )
        if reference is not None:
            _reference_section(blocks, figures, reference, reference_name, shares)

        if not analysis.stash_runs().empty:  # runs of a Stash study (`ddlbench stash run`) only
            stalls = analysis.stash_stalls()
            blocks.append(Block("heading", "Stash stalls"))
            if stalls.empty:
                blocks.append(
                    Block(
                        "text",
                        "No paired runs (synthetic on 1 GPU / N GPUs on 1 node / N over k nodes / "
                        "real data warm and cold, same per-GPU batch and samples).",
                    )
                )
            else:
                blocks.append(Block("table", stalls.round(3), key=("stall_pct", "stall_pct_of_training")))
                _figure(
                    blocks,
                    figures,
                    "stash_stalls",
                    lambda: plots.stash_bars(stalls),
                    "Stash stalls, % of the paired baseline.",
                )
    elif reference is not None:
        _reference_section(blocks, figures, reference, reference_name, None)

    _utilisation_section(blocks, figures, analysis)
    telemetry = campaign.telemetry
    if not telemetry.empty and "t_s" in telemetry:
        blocks.append(Block("heading", "Telemetry"))
        # the runs with the most GPUs first: that is where stragglers and stalls show
        sizes = runs.set_index("run_id")["world_size"] if "world_size" in runs else pd.Series(dtype="float64")
        chosen = sorted(telemetry["run_id"].unique(), key=lambda r: (-float(sizes.get(r, 0) or 0), r))
        if len(chosen) > MAX_TELEMETRY_FIGURES:
            blocks.append(
                Block(
                    "text",
                    f"{len(chosen)} runs have telemetry; timelines of the "
                    f"{MAX_TELEMETRY_FIGURES} with the most GPUs are shown.",
                )
            )
        for i, run_id in enumerate(chosen[:MAX_TELEMETRY_FIGURES]):
            _figure(
                blocks,
                figures,
                f"telemetry_{i}",
                lambda run_id=run_id: plots.telemetry_timeline(telemetry, run_id=run_id),
                f"Telemetry of {run_id}.",
            )
    collectives = campaign.commbench[~campaign.commbench["op"].isin(metrics.GPU_TEST_OPS)]
    if not collectives.empty and collectives["busbw_gb_s"].notna().any():
        blocks.append(Block("heading", "Collective bandwidth (commbench)"))
        _figure(
            blocks,
            figures,
            "commbench",
            lambda: plots.commbench_curves(campaign.commbench),
            "Bus bandwidth vs message size per collective and world size.",
        )
    _interconnect_section(blocks, figures, analysis)

    blocks.append(Block("heading", "Excluded runs (not counted)"))
    blocks.append(Block("table", excluded[["run_id", "status", "reason"]].reset_index(drop=True)))
    if not campaign.problems.empty:
        blocks.append(Block("heading", "Skipped lines and files"))
        blocks.append(Block("table", campaign.problems))
    return blocks, figures


MODES_SHOWN = [
    "model",
    "loader",
    "world_size",
    "num_nodes",
    "per_gpu_batch",
    "mode",
    "precision",
    "variant",
    "num_repeats",
    *metrics.MODES,
]


def _modes_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis, cells: pd.DataFrame) -> None:
    """Seed study C's comparison, where cells differ only in data-parallel mode and precision and one of
    them is the baseline: a table per sample unit (throughput in img/s or seq/s, never mixed) and a figure
    per group of training time relative to the baseline, GPU utilisation, peak memory and PCIe traffic."""
    counted = analysis.counted()
    table = metrics.mode_cells(cells, counted, utilisation=analysis.utilisation(), memory=metrics.peak_memory(counted))
    if table.empty:
        return
    blocks.append(Block("heading", "Modes and precisions"))
    note = (
        "Cells that differ only in data-parallel mode (framework and its settings) and precision, one group "
        "per model and size. relative_time: the time to train the same samples against the group's "
        f"baseline, PyTorch DDP in full precision without the ZeRO optimizer ({metrics.MODE_BASELINE_TEXT}) "
        "= 1.0: the baseline's throughput over the cell's (below 1: faster; empty where a group holds "
        "several baseline cells). mode: the framework and its ZeRO stage where it has one; variant: the "
        "settings that tell alike cells apart (framework.zero_optimizer=True: DDP with torch's "
        "ZeroRedundancyOptimizer). GPU utilisation and PCIe rx/tx (host to GPU / GPU to host, GB = 1e9 "
        "bytes) are means over the telemetry samples of the whole run (see Utilisation); peak memory the "
        "largest torch.cuda peak over the cell's runs and ranks (GiB). Throughput is in each model's "
        "sample unit (summary.json's sample_unit: images, or sequences), one table per unit."
    )
    units = table.groupby("sample_unit", sort=True)
    for k, (unit, rows) in enumerate(units, 1):
        shown = _shown(rows, MODES_SHOWN)
        shown = shown[[c for c in shown if c not in metrics.MODES or shown[c].notna().any()]]
        rate = f"throughput{metrics.rate_suffix(unit)}"
        if table["sample_unit"].nunique() > 1:
            blocks.append(Block("text", f"Models whose samples are {unit} ({metrics.rate_label(unit)}):"))
        blocks.append(
            Block(
                "table",
                shown.rename(columns={"samples_s": rate}).round(2),
                note=note if k == len(units) else "",
                key=("relative_time", rate),
            )
        )
    for k, (_, rows) in enumerate(table.groupby("mode_group", sort=False)):
        first = rows.iloc[0]
        gpus = "CPU rank" if first["device"] == "cpu" else "GPU"
        title = (
            f"{first['model']}, {first['world_size']} {gpus}{'s' if first['world_size'] != 1 else ''} on "
            f"{first['num_nodes']} node{'s' if first['num_nodes'] != 1 else ''}, {first['per_gpu_batch']} "
            f"{first['sample_unit']} per {gpus}, {first['loader']}"
        )
        _figure(
            blocks,
            figures,
            f"modes_{k}",
            lambda rows=rows, title=title: plots.mode_bars(rows, title=title),
            f"Modes and precisions, {title}: training time relative to the baseline, PyTorch DDP fp32 without the "
            f"ZeRO optimizer ({metrics.MODE_BASELINE_TEXT}) = 1.0 (dashed), then what each cell's telemetry and "
            "memory peaks have: GPU utilisation, peak GPU memory (filled: allocated, outline: reserved), PCIe rx "
            "and tx. One bar per cell, labelled with its mode, precision and variant; colour: framework, "
            "hatched: AMP.",
        )


HOSTS_SHOWN_ROWS = 48  # host rows a report lists: the runs with a slow host first, then the others while room is left


def _hosts_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Per-host step, compute and collective times of the runs on 2+ hosts, naming the slow hosts."""
    counted = set(analysis.counted()["run_id"].astype(str))
    ranks = analysis.campaign.ranks
    hosts = metrics.host_times(analysis.campaign.steps, ranks[ranks["run_id"].astype(str).isin(counted)])
    if hosts.empty:
        return
    slow = metrics.slow_hosts(hosts)
    blocks.append(Block("heading", "Hosts"))
    note = (
        "Per host of each run on more than one host (the host each rank log's header names), over its ranks' "
        "measured steps: step_ms (mean, p95), compute_ms (fwd + bwd + opt less the exposed collective time "
        "where it is timed), comm_ms (collectives, overlapped or not) and comm_exposed_ms (empty where not "
        "timed), data_ms. A host is slow (straggler) when its compute is more than "
        f"{metrics.STRAGGLER_PCT:g}% and {metrics.STRAGGLER_MIN_MS:g} ms per step slower than the run's median "
        "host's (compute_slowdown_pct). Compute, not step time: in synchronous training every rank's step "
        "lasts as long as the slowest one's, the others wait in the collectives. Without a collective "
        "timer (framework.comm_timer=auto is off on GPUs) that wait falls inside the others' bwd and "
        "evens their compute out with the slow host's: look at fwd_ms then (no collective in DDP's "
        "forward), and time collectives (framework.comm_timer=on) in a run meant to find a slow node."
    )
    if slow.empty:
        blocks.append(Block("text", f"No slow host in the {hosts['run_id'].nunique()} run(s) on several hosts."))
    else:
        named = [
            f"{r.host} (ranks {r.ranks}) in {r.run_id}: compute {r.compute_ms_mean:.1f} ms per step, "
            f"{r.compute_slowdown_pct:+.1f}% against the median host"
            for r in slow.itertuples(index=False)
        ]
        blocks.append(Block("text", "Slow hosts: " + "; ".join(named) + "."))
    order = [
        *dict.fromkeys(slow["run_id"]),
        *(r for r in dict.fromkeys(hosts["run_id"]) if r not in set(slow["run_id"])),
    ]
    chosen, size = [], 0
    for run_id in order:
        count = int((hosts["run_id"] == run_id).sum())
        if chosen and size + count > HOSTS_SHOWN_ROWS:
            break
        chosen.append(run_id)
        size += count
    shown = hosts[hosts["run_id"].isin(chosen)].copy()
    shown["run_id"] = pd.Categorical(shown["run_id"], categories=chosen, ordered=True)
    shown = shown.sort_values(["run_id", "host"]).assign(
        run_id=lambda d: d["run_id"].astype(str), straggler=lambda d: d["straggler"].map({True: "slow", False: ""})
    )
    shown = shown[[c for c in shown if shown[c].notna().any()]]
    left = hosts["run_id"].nunique() - len(chosen)
    if left:
        blocks.append(Block("text", f"{left} more run(s) on several hosts, without a slow host, are not listed."))
    blocks.append(
        Block("table", shown.reset_index(drop=True).round(2), note=note, key=("compute_slowdown_pct", "straggler"))
    )
    _figure(
        blocks,
        figures,
        "hosts",
        lambda: plots.host_bars(hosts, run_ids=(list(dict.fromkeys(slow["run_id"])) or chosen)[:4]),
        "Per-host mean step time of "
        + ("the runs with a slow host" if not slow.empty else "runs on several hosts")
        + " (up to 4): data, compute and the rest of the step (waiting in collectives, other) per host, its "
        "ranks under its name; dotted: the median host's data + compute; a slow host's name in bold.",
    )


UTILISATION_SHOWN = [*metrics.CELL, "variant", "num_repeats", *metrics.UTILISATION]
UTILISATION_KEY = ("gpu_util_pct_mean", "gpu_util_pct_p95", "cpu_pct_mean")


def _utilisation_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Per cell, what the GPUs, their links and the hosts were doing (telemetry), where counted runs have it."""
    table = analysis.utilisation()
    if table.empty:
        return
    shown = _shown(table, UTILISATION_SHOWN)
    shown = shown[[c for c in shown if c not in metrics.UTILISATION or shown[c].notna().any()]]
    blocks.append(Block("heading", "Utilisation"))
    blocks.append(Block("text", "Per cell, what its GPUs, their links and its hosts were doing (telemetry)."))
    blocks.append(
        Block(
            "table",
            shown.round(1),
            key=UTILISATION_KEY,
            note=(
                "From the telemetry samples (benchmarks/telemetry.py) over the whole run, sampler start to stop "
                "(start-up, warm-up and evaluations included: the rank logs carry no wall-clock times to match the "
                "measured window to), mean over the cell's repeats with telemetry (num_repeats). GPU figures pool "
                "every GPU's samples; p95 is the 95th percentile of the samples; peaks are the largest sample. "
                "CPU % and host memory are host-wide, one rank per host. GB = 1e9 bytes; PCIe rx is host to GPU. "
                "A column no sample has (NVLink without its counters, GPU fields without NVML) is left out."
            ),
        )
    )
    if any(c in shown for c in plots.UTILISATION_PANELS):
        _figure(
            blocks,
            figures,
            "utilisation",
            lambda: plots.utilisation_bars(table),
            "Utilisation per configuration over the whole run (one bar per cell; colour: framework, hatched: DALI).",
        )


def _interconnect_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """commbench's GPU tests, where the campaign holds their records: the P2P matrix and concurrent H2D copies."""
    matrix, h2d = analysis.p2p_matrix(), analysis.h2d_bandwidth()
    if not matrix.empty:
        blocks.append(Block("heading", "GPU-to-GPU copies (commbench P2P)"))
        blocks.append(
            Block(
                "table",
                matrix.round(2),
                key=("p2p_gb_s", "p2p_latency_us"),
                note=(
                    "Per ordered GPU pair of a node (one process drives every GPU): p2p_gb_s, the bandwidth of a "
                    "large copy (benchmarks/commbench/gpu.py P2P_BYTES) from src_gpu to dst_gpu (GB = 1e9 bytes), "
                    "p2p_latency_us, a 4-byte copy's time, "
                    "and whether peer access was on (off: the copy goes through the host)."
                ),
            )
        )
        _figure(
            blocks,
            figures,
            "p2p_matrix",
            lambda: plots.p2p_heatmap(matrix),
            "P2P copy bandwidth (GB/s) from each source GPU (rows) to each destination GPU (columns).",
        )
    if not h2d.empty:
        blocks.append(Block("heading", "Host-to-device copies, all GPUs at once (commbench H2D)"))
        blocks.append(
            Block(
                "table",
                h2d.round(2),
                key=("h2d_gb_s",),
                note=(
                    "Per rank, its pinned-host to GPU copy bandwidth (h2d_gb_s, GB = 1e9 bytes) while concurrent_gpus "
                    "ranks copy at the same time: what a loader's transfers can reach when every GPU is fed at once. "
                    "rank is the record's place in the file (ranks in order); host is where the file was written."
                ),
            )
        )
        _figure(
            blocks,
            figures,
            "h2d_bandwidth",
            lambda: plots.h2d_bars(h2d),
            "Host-to-device copy bandwidth per rank, every rank copying at once.",
        )


TRACE_CONFIG = [*metrics.CELL, "variant"]
# the window's classes that add up to 100% of its step time: the key figures of its table
TRACE_KEY = ("conv_pct", "gemm_pct", "other_compute_pct", "copies_pct", "comm_exposed_pct", "idle_pct")
# the seed's layout (study A's table: % of runtime) from the trace window: its column -> this campaign's
SEED_LAYOUT = {
    "allreduce_pct": "allreduce_exposed_runtime_pct",
    "data_pct": "data_runtime_pct",
    "cudnn_pct": "conv_runtime_pct",
}


def seed_layout(traced: pd.DataFrame, reference: pd.DataFrame | None) -> pd.DataFrame:
    """One row per traced cell in seed study A's layout: AllReduce % (exposed), data % and cuDNN %
    (convolution kernels) of the runtime, for every framework x loader x GPU count; with a reference,
    its values beside the PyTorch-DDP cells that match one of its cells (model, loader, GPUs)."""
    keep = [
        c
        for c in ["model", "framework", "loader", "world_size", "num_nodes", "precision", "per_gpu_batch", "variant"]
        if c in traced
    ]
    out = traced[keep].rename(columns={"world_size": "gpus"}).copy()
    for seed, here in SEED_LAYOUT.items():
        out[seed] = traced[here].astype("float64")
    if reference is not None:
        ref = reference.rename(columns={c: f"{c}_ref" for c in ("allreduce_pct", "data_pct", "compute_pct")})
        ddp = out["framework"] == "ddp"
        out = out.assign(gpus=out["gpus"].astype(int)).merge(ref, on=REFERENCE_KEY, how="left")
        for column in ("allreduce_pct_ref", "data_pct_ref", "compute_pct_ref"):
            out[column] = out[column].where(ddp.to_numpy())
    return out.sort_values(
        [c for c in ["model", "framework", "loader", "gpus"] if c in out],
        kind="stable",
        key=lambda col: col.map(plots._model_key) if col.name == "model" else col,
    ).reset_index(drop=True)


def _accuracy_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Validation accuracy (runs with data.val_path or data.val_split): the last evaluation per cell with
    its schedule and global batch; time to accuracy where runs had run.target_top1; and the figures the
    runs have data for: top-1 over training (per schedule and global batch in a study, else per run),
    final top-1 against the global batch, training loss and lr against the step."""
    accuracy = analysis.accuracy()
    if accuracy.empty:
        return
    blocks.append(Block("heading", "Validation accuracy"))
    note = (
        "The last evaluation of each run on its held-out set (data.val_path, or the data.val_split share of "
        "data.path), every rank its shard, summed over ranks; mean over the num_repeats runs. schedule: "
        "optim.schedule.name; global_batch: per-GPU batch x GPUs; epochs: the training epochs done at "
        "that evaluation (empty for eval.jsonl files that predate it; a run that reached its run.target_top1 "
        "stopped there, so its last evaluation is that one). eval_s: the evaluations' seconds, in no "
        "training step (throughput leaves them out). chance_pct: the top-1 of a guess, 100 / the data "
        "set's classes (model.num_classes where the run did not count them): a top-1 near it has "
        "learned nothing yet."
    )
    accuracy = accuracy.assign(chance_pct=metrics.chance_pct(accuracy, analysis.counted()))
    columns = [*metrics.CELL, "variant", *metrics.STUDY, "num_repeats", *metrics.ACCURACY]
    columns.insert(columns.index("top1_pct") + 1, "chance_pct")
    if not accuracy["schedule"].astype(bool).any():
        columns.remove("schedule")  # runs from before schedules
    if accuracy["epochs"].isna().all():
        columns.remove("epochs")
    if accuracy["chance_pct"].isna().all():
        columns.remove("chance_pct")  # runs whose classes no file says
    blocks.append(Block("table", _shown(accuracy, columns).round(3), note=note, key=("top1_pct", "chance_pct")))
    target = analysis.time_to_accuracy()
    if not target.empty:
        blocks.append(Block("heading", "Time to accuracy (run.target_top1)", 3))
        shown = target.assign(
            reached=[f"{int(k)} of {int(n)}" for k, n in zip(target["num_reached"], target["num_repeats"])]
        )
        blocks.append(
            Block(
                "table",
                _shown(
                    shown,
                    [
                        *metrics.CELL,
                        "variant",
                        *metrics.STUDY,
                        "target_top1_pct",
                        "reached",
                        "time_to_target_s",
                        "samples_to_target",
                        "steps_to_target",
                    ],
                ).round(1),
                note=(
                    "A run stops at the first evaluation whose top-1 reaches the target. reached: of the cell's "
                    "repeats, how many did; time_to_target_s (seconds since the first training step, evaluations "
                    "included: MLPerf's clock), samples_to_target (global training samples) and steps_to_target: "
                    "the mean over the repeats that reached it (empty where none did)."
                ),
                key=("time_to_target_s", "reached", "target_top1_pct"),
            )
        )
    curves = analysis.accuracy_curves()
    study = accuracy["schedule"].nunique() > 1 or accuracy["global_batch"].nunique() > 1
    over = "epochs" if curves["epochs"].notna().all() else "optimizer step"
    if study and curves["step"].nunique() > 1:
        _figure(
            blocks,
            figures,
            "accuracy_by_schedule",
            lambda: plots.accuracy_by_schedule(curves),
            f"Validation top-1 against the {over} (eval.jsonl), one panel per global batch, one line per cell "
            "coloured by schedule (mean over repeats; band: min-max).",
        )
    elif curves["step"].nunique() > 1:
        evals = analysis.evals()
        _figure(
            blocks,
            figures,
            "accuracy_vs_step",
            lambda: plots.accuracy_curves(evals),
            "Validation top-1 against the optimizer step, one curve per run.",
        )
    if accuracy["global_batch"].nunique() > 1:
        _figure(
            blocks,
            figures,
            "top1_vs_global_batch",
            lambda: plots.top1_vs_global_batch(accuracy),
            "Final validation top-1 (the table above) against the global batch (log scale; k = 1024), one line per "
            "schedule and configuration.",
        )
    training = analysis.training_curves()
    if not training.empty and training["lr"].notna().any():
        _figure(
            blocks,
            figures,
            "loss_and_lr",
            lambda: plots.loss_and_lr(training),
            "Training loss (mean over ranks) and learning rate against the optimizer step, from the rank logs "
            f"(warm-up included; mean over repeats, at most {metrics.TRAINING_POINTS} points per line), a row per "
            "global batch.",
        )


def _trace_section(
    blocks: list[Block], figures: dict, analysis: CampaignAnalysis, reference: pd.DataFrame | None
) -> None:
    """The trace window's breakdown by kernel class (both denominators), the seed's layout, and where
    timers and trace disagree; nothing when no run has a trace window."""
    traced = analysis.trace_breakdown()
    if traced.empty:
        return
    blocks.append(Block("heading", "Where the time goes: the trace window"))
    blocks.append(
        Block(
            "table",
            _shown(traced, [*TRACE_CONFIG, *metrics.TRACE_SHARES, *metrics.TRACE_PERTURBATION]).round(3),
            key=TRACE_KEY,
            note=(
                "From each run's profiler window (run.trace: a few steps after the measured ones on every rank, on by "
                "default on GPUs; or run.profile_steps), kernels classified by name: cuDNN convolution (conv), GEMM, "
                "other compute, copies (h2d: host-to-device), collectives (allreduce: total, and exposed: not hidden "
                "behind compute or copies; comm: every collective) and idle. Shares of the window's step time, mean "
                "over ranks and repeats; compute + copies + exposed comm + idle = 100%. window_slowdown: the window's "
                "median step against the measured steps' (1.00: the profiler left the steps as they were; above, it "
                "slowed them: a host that records every op (an explicit window, or a CPU run) can fall behind the GPU, "
                "which then idles, so idle_pct is inflated by about 1 - 1/window_slowdown; the sampled window on GPUs "
                "records device activity only)."
            ),
        )
    )
    blocks.append(Block("heading", "The same as shares of the runtime", 3))
    blocks.append(
        Block(
            "table",
            _shown(traced, [*TRACE_CONFIG, *metrics.TRACE_RUNTIME]).round(1),
            key=tuple(metrics.TRACE_RUNTIME),
            note=(
                "Shares of the whole runtime (summary runtime_s: process start to the last step, so start-up "
                "and data loading count), which is how seed study A's table reads: a class's window share times the "
                "rank's step time over all its steps, over the runtime; data from the phase timers; start-up: what no "
                "step holds."
            ),
        )
    )
    _figure(
        blocks,
        figures,
        "trace_breakdown",
        lambda: plots.trace_breakdown_bars(traced),
        "Where the time goes from the trace window: shares of step time (left) and of the runtime (right).",
    )
    layout = seed_layout(traced, reference)
    blocks.append(Block("heading", "In seed study A's layout", 3))
    blocks.append(
        Block(
            "table",
            layout.round(1),
            key=(*SEED_LAYOUT, "allreduce_pct_ref", "data_pct_ref", "compute_pct_ref"),
            note=(
                "% of runtime: allreduce_pct (exposed allreduce), data_pct (waiting for the "
                "batch), cudnn_pct (cuDNN convolution kernels), for each framework, loader and GPU count"
                + (
                    "; *_ref: the reference's PyTorch-DDP values where model, loader and GPU count match (its "
                    "compute_pct is cuDNN time)."
                    if reference is not None
                    else "; --reference aach2023 adds the study's values beside them."
                )
            ),
        )
    )
    disagree = analysis.timers_vs_trace()
    if not disagree.empty:
        far = disagree[disagree["disagreement_pp"] > metrics.DISAGREEMENT_PP]
        shown = [
            "run_id",
            "rank",
            "disagreement_pp",
            "worst",
            *[c for c in disagree.columns if c.endswith(("_timer_pct", "_trace_pct"))],
        ]
        if far.empty:
            blocks.append(
                Block(
                    "text",
                    (
                        f"Timers and trace agree within {metrics.DISAGREEMENT_PP:g} percentage points on every traced rank "
                        f"({len(disagree)}; largest {disagree['disagreement_pp'].max():.1f} pp)."
                    ),
                )
            )
        else:
            blocks.append(
                Block(
                    "text",
                    f"Timers and trace disagree by more than {metrics.DISAGREEMENT_PP:g} percentage points on "
                    f"{len(far)} of {len(disagree)} traced ranks: trust the trace for the split, the timers for the "
                    "step time.",
                )
            )
            blocks.append(
                Block(
                    "table",
                    far[shown].round(1),
                    note=(
                        "The same steps, pair by pair (*_timer_pct against *_trace_pct): compute <-> compute + "
                        "copies, exposed comm <-> exposed comm, data + other <-> idle, total comm <-> total comm "
                        "where timed; disagreement_pp: the largest difference, worst: its pair."
                    ),
                    key=("disagreement_pp", "worst"),
                )
            )


# Seed study A's breakdown (aach2023): AllReduce, data and compute are stacked as parts of one runtime (they sum
# below 100; the rest is other work). ddlbench's parts alike (analysis/reference/README.md): exposed allreduce
# (communication not hidden behind compute; the total overlaps backward and would count that time twice), data
# (waiting for the batch), compute without exposed allreduce, and other (step minus the three) kept apart like
# the seed's rest (its compute is cuDNN time, not the rest of the step).
REFERENCE_KEY = ["model", "loader", "gpus"]
REFERENCE_SIDES = [  # (reference column, this campaign's share column, its name here); tables add _ref / _here
    ("allreduce_pct", "allreduce_exposed_share", "allreduce_exposed_pct"),
    ("data_pct", "data_share", "data_pct"),
    ("compute_pct", "compute_share", "compute_pct"),
    ("other_pct", "other_share", "other_pct"),
]
_REFERENCE_CONFIG = ["precision", "per_gpu_batch", "num_nodes", "variant"]  # what tells matching cells apart
_REFERENCE_TABLE = [
    *REFERENCE_KEY,
    *_REFERENCE_CONFIG,
    *(name for ref, _, here in REFERENCE_SIDES for name in (f"{ref}_ref", f"{here}_here")),
]


def reference_comparison(reference: pd.DataFrame, shares: pd.DataFrame | None) -> pd.DataFrame:
    """One row per DDP cell of this campaign whose (model, loader, GPU count) is a reference cell, in % of
    step time: the reference's parts (*_ref, other_pct_ref = the rest up to 100) beside this cell's, defined
    alike (*_here, REFERENCE_SIDES), plus the tops of this cell's parts stacked in the figure's order
    (data_top_pct, compute_top_pct, allreduce_top_pct = 100 - other), so that markers and bars read alike
    and no stack passes 100%. Several cells can match one reference cell (another precision, batch, node
    count or variant): each keeps its row, and `series` names what tells them apart ('' when nothing
    does). Where a run did not time its allreduce (framework.comm_timer off) that time is inside
    compute: allreduce_exposed_pct_here and compute_pct_here are left empty, allreduce_top_pct is still
    the top of the two."""
    columns = [*_REFERENCE_TABLE, "series", "data_top_pct", "compute_top_pct", "allreduce_top_pct"]
    if shares is None or shares.empty:
        return pd.DataFrame(columns=columns)
    ref = reference.assign(other_pct=100 - reference[["allreduce_pct", "data_pct", "compute_pct"]].sum(axis=1))
    ddp = shares[shares["framework"] == "ddp"].rename(columns={"world_size": "gpus"})
    side = ref.merge(ddp.assign(gpus=ddp["gpus"].astype(int)), on=REFERENCE_KEY)
    if side.empty:
        return pd.DataFrame(columns=columns)
    timed = side["allreduce_exposed_share"].notna()
    here = {shown: 100 * side[share].astype("float64") for _, share, shown in REFERENCE_SIDES}
    here["compute_pct"] = here["compute_pct"].where(timed)
    out = side[[c for c in [*REFERENCE_KEY, *_REFERENCE_CONFIG] if c in side]].copy()
    for ref_column, _, shown in REFERENCE_SIDES:
        out[f"{ref_column}_ref"], out[f"{shown}_here"] = side[ref_column].astype("float64"), here[shown]
    varying = [c for c in _REFERENCE_CONFIG if c in out and out[c].fillna("").astype(str).nunique() > 1]
    out["series"] = (
        [
            ", ".join(_series_part(c, v) for c, v in zip(varying, values))
            for values in out[varying].itertuples(index=False)
        ]
        if varying
        else ""
    )
    out["data_top_pct"] = here["data_pct"]
    out["compute_top_pct"] = here["data_pct"] + here["compute_pct"]
    out["allreduce_top_pct"] = here["data_pct"] + 100 * side["compute_share"] + here["allreduce_exposed_pct"].fillna(0)
    out = out.sort_values([c for c in [*REFERENCE_KEY[1:], *_REFERENCE_CONFIG] if c in out]).sort_values(
        "model", key=lambda m: m.map(plots._model_key), kind="stable"
    )
    return out.reindex(columns=[c for c in columns if c in out]).reset_index(drop=True)


def _series_part(column: str, value: object) -> str:
    """How a setting that tells matching cells apart reads in the figure's legend."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) or value == "":
        return f"no {column}"
    text = f"{value:g}" if isinstance(value, (int, float, np.integer, np.floating)) else str(value)
    if column == "per_gpu_batch":
        return f"b{text}"
    if column == "num_nodes":
        return f"{text} node{'s' if text != '1' else ''}"
    return text


def _reference_section(
    blocks: list[Block], figures: dict, reference: pd.DataFrame, reference_name: str, shares: pd.DataFrame | None
) -> None:
    """The reference overlay: its breakdown with this campaign's matching DDP cells defined and stacked
    alike (reference_comparison), and the two side by side; says in words when no cell matches. `shares`:
    breakdown cells, None when no run was counted."""
    side = reference_comparison(reference, shares)
    num_ddp = 0 if shares is None or shares.empty else int((shares["framework"] == "ddp").sum())
    blocks.append(Block("heading", f"Compared with {reference_name}"))
    blocks.append(
        Block(
            "text",
            (
                f"{reference_name} gives PyTorch-DDP's AllReduce, data (I/O) and compute (cuDNN) in % of runtime as parts "
                "of one runtime, stacked (they sum below 100; the rest is other work). This campaign's DDP cells are "
                "compared alike: exposed allreduce (communication not hidden behind compute; the total overlaps "
                "backward, so stacked on compute it counts that time twice), data (waiting for the next batch), "
                "compute without the exposed allreduce, and other (the rest of the step) kept apart like the "
                "reference's rest. A cell matches when model, loader and GPU count are equal; several cells matching "
                "one reference cell (another precision, batch, node count or variant) are each shown."
            ),
        )
    )
    if side.empty:
        blocks.append(
            Block(
                "text",
                f"No cell of this campaign matches a reference cell (model, loader, GPUs): "
                f"{num_ddp} PyTorch-DDP cell(s), none at a model, loader and GPU count of "
                f"{reference_name}; the figure shows the reference alone.",
            )
        )
    configurations = side["series"].nunique() if not side.empty else 0
    caption = (
        f"PyTorch-DDP time breakdown from {reference_name} (bars, bottom to top: data, compute, allreduce, "
        "the rest up to 100%: other work). "
    )
    if side.empty:
        caption += "No cell of this campaign matches a reference cell (model, loader, GPUs): no markers."
    else:
        caption += (
            "Markers: this campaign's matching DDP cells, stacked the same way: tops of data, of compute "
            "(without exposed allreduce) and of exposed allreduce; from there to 100% is ddlbench's other. "
            "A missing compute marker: that run did not time its allreduce, so it is inside compute."
        )
        if configurations > 1:
            caption += f" {configurations} configurations match: one fill each (legend), side by side within the bar."
    _figure(
        blocks,
        figures,
        f"reference_{reference_name}",
        lambda: plots.reference_breakdown(reference, ours=side, source=reference_name),
        caption,
    )
    shown = [c for c in _REFERENCE_TABLE if c in side and (c != "variant" or side[c].fillna("").astype(bool).any())]
    if not side.empty:
        blocks.append(
            Block("text", f"{len(side)} of {num_ddp} PyTorch-DDP cells match a reference cell; one row each.")
        )
    _table_if_rows(
        blocks,
        side[shown],
        (
            f"*_ref: {reference_name} (other_pct_ref: the rest up to 100); *_here: this campaign, mean over repeats, "
            "in % of step time. allreduce_exposed_pct_here and compute_pct_here are empty where the run did not time "
            "its allreduce (framework.comm_timer off, the default on GPUs): that time is then inside compute."
        ),
        key=tuple(name for ref, _, here in REFERENCE_SIDES for name in (f"{ref}_ref", f"{here}_here")),
    )


def render_markdown(blocks: list[Block], figure_files: dict[str, list[str]]) -> str:
    """The report as markdown; long variants have one label (v1, v2, ...) in every table of it."""
    labels = variant_labels([b.content for b in blocks if b.kind == "table"])
    out = []
    for block in blocks:
        if block.kind == "heading":
            out.append("#" * block.level + " " + str(block.content))
        elif block.kind == "text":
            out.append(str(block.content))
        elif block.kind == "table":
            out.append(markdown_table(block.content, labels=labels))
            if block.note:
                out.append(block.note)
        elif block.kind == "figure":
            name, caption = block.content
            files = figure_files[name]
            links = " ".join(f"[{Path(f).suffix[1:]}]({f})" for f in files[1:])
            out.append(f"![{caption}]({files[0]})\n\n_{caption}_ {links}")
    return "\n\n".join(out) + "\n"


def render_html(blocks: list[Block], figure_files: dict[str, list[str]], title: str) -> str:
    """The report as one static page; long variants have one label (v1, v2, ...) in every table of it."""
    labels = variant_labels([b.content for b in blocks if b.kind == "table"])
    body = []
    for block in blocks:
        if block.kind == "heading":
            body.append(f"<h{block.level}>{html.escape(str(block.content))}</h{block.level}>")
        elif block.kind == "text":
            body.append(f"<p>{html.escape(str(block.content))}</p>")
        elif block.kind == "table":
            body.append(html_table(block.content, key=block.key, note=block.note, labels=labels))
        elif block.kind == "figure":
            name, caption = block.content
            files = figure_files[name]
            links = " ".join(f'<a href="{html.escape(f)}">{Path(f).suffix[1:]}</a>' for f in files[1:])
            body.append(
                f'<figure><img src="{html.escape(files[0])}" alt="{html.escape(caption)}">'
                f"<figcaption>{html.escape(caption)} {links}</figcaption></figure>"
            )
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        ".scroll{max-width:100%;overflow-x:auto;margin:1em 0}"
        "table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}"
        # a header wraps between its words: the column is as wide as its figures, not its name
        "th{background:#f3f3f3;text-align:center;position:sticky;top:0;white-space:normal;vertical-align:bottom}"
        "td.num{text-align:right;font-variant-numeric:tabular-nums}td.txt{text-align:left}"
        "th.key{background:#e4ecf5}.key-end{border-right:2px solid #888}"
        "td.variant{text-decoration:underline dotted;cursor:help}"
        "details{font-size:13px;color:#444;margin:-0.5em 0 1em}summary{cursor:pointer;color:#555}"
        "img{max-width:100%}figcaption{font-size:12px;color:#555}"
    )
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


_PENDING: dict = {}  # name -> draw callable, inherited by forked workers


def _render(task: tuple[str, str, tuple[str, ...]]) -> tuple[str, list[str], float]:
    """Draw one figure and write it in each format; runs in a worker process (or inline)."""
    name, out, formats = task
    t = time.process_time()
    files = []
    with matplotlib.rc_context(PAPER_RC):
        fig = _PENDING[name]()
        for fmt in formats:
            path = Path(out) / "figures" / f"{name}.{fmt}"
            # PNGs are for the HTML page (150 dpi, fast zlib level); SVG/PDF are the print versions
            extra = {"dpi": 150, "pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
            fig.savefig(path, format=fmt, bbox_inches=None, **extra)
            files.append(path.relative_to(out).as_posix())
    return name, files, time.process_time() - t


def save_figures(
    figures: dict, out: Path, formats: tuple[str, ...], *, jobs: int | None = None
) -> dict[str, list[str]]:
    """Draw and write each figure once per format into out/figures (PNG first in each list). With
    jobs > 1 figures are drawn in forked worker processes: matplotlib is single-threaded and the
    figures are independent."""
    (out / "figures").mkdir(exist_ok=True)
    jobs = min(len(figures), jobs if jobs is not None else (os.cpu_count() or 1))
    tasks = [(name, str(out), formats) for name in figures]
    _PENDING.clear()
    _PENDING.update(figures)
    try:
        if jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                results = pool.map(_render, tasks, chunksize=1)
        else:
            results = [_render(task) for task in tasks]
    finally:
        _PENDING.clear()
    save_figures.last_cpu_s = sum(cpu for _, _, cpu in results)
    return {name: files for name, files, _ in results}


def build_report(
    runs_dir: Path,
    out: Path,
    *,
    reference: str | None = None,
    formats: tuple[str, ...] = ("png", "svg"),
    parquet: bool = False,
    jobs: int | None = None,
) -> dict[str, float]:
    """Load a runs directory, assemble and write out/report.md, out/report.html and out/figures/*;
    returns the time of each stage (seconds) and counts, for the speed benchmark."""
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ConfigError(f"RUNS_DIR {runs_dir} is not a directory; pass the folder runs were written to (run.root)")
    bad = [f for f in formats if f not in FORMATS]
    if bad or "png" not in formats:
        raise ConfigError(f"--formats {','.join(formats)}: use png plus any of svg, pdf (e.g. --formats png,svg)")
    out = _fresh_dir(out)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    campaign = load_campaign(runs_dir)
    timings["load_s"] = time.perf_counter() - t
    ref = load_reference(reference) if reference else None
    t = time.perf_counter()
    analysis = CampaignAnalysis(runs_dir, campaign=campaign)
    blocks, figures = assemble(campaign, reference=ref, reference_name=reference, analysis=analysis)
    timings["metrics_s"] = time.perf_counter() - t
    t = time.perf_counter()
    files = save_figures(figures, out, tuple(dict.fromkeys(["png", *formats])), jobs=jobs)
    timings["figures_s"] = time.perf_counter() - t
    timings["figures_cpu_s"] = save_figures.last_cpu_s
    t = time.perf_counter()
    (out / "report.md").write_text(render_markdown(blocks, files))
    (out / "report.html").write_text(render_html(blocks, files, f"ddlbench report: {runs_dir}"))
    if parquet:
        export_parquet(campaign, out / "parquet")
    timings["write_s"] = time.perf_counter() - t
    timings.update(
        num_runs=len(campaign.runs),
        num_counted=len(analysis.counted()),
        num_step_rows=len(campaign.steps),
        num_figures=len(figures),
    )
    return timings


def compare_campaigns(
    a_dir: Path, b_dir: Path, *, threshold: float = 0.05, top1_drop_pp: float = metrics.TOP1_DROP_PP
) -> pd.DataFrame:
    """Per-cell deltas of campaign B against campaign A (CampaignAnalysis.compare): throughput, and final
    top-1 and time to target where the cells have them."""
    analyses = []
    for option, root in (("A", a_dir), ("B", b_dir)):
        if not Path(root).is_dir():
            raise ConfigError(f"{option}={root} is not a directory; pass two runs directories (campaigns)")
        analysis = CampaignAnalysis(Path(root))
        if option == "A" and analysis.run_throughput().empty:
            raise ConfigError(f"{option}={root} holds no completed run; run `ddlbench results {root}` to see why")
        analyses.append(analysis)
    return analyses[0].compare(analyses[1], threshold=threshold, top1_drop_pp=top1_drop_pp)


COMPARE_COLUMNS = [
    *metrics.CELL,
    "variant",
    "throughput_img_s_a",
    "throughput_img_s_b",
    "delta",
    "rel_delta",
    "num_repeats_a",
    "num_repeats_b",
    "flag",
    "judged_by",
]
# shown where some cell has them in both campaigns (evaluations; a target)
COMPARE_ACCURACY = {
    "top1": ["top1_pct_a", "top1_pct_b", "top1_delta_pp"],
    "target": ["time_to_target_s_a", "time_to_target_s_b", "time_to_target_rel_delta"],
}
FAILING_FLAGS = ("regression", "missing in B", "incomplete in B")


def format_compare(table: pd.DataFrame, *, threshold: float, top1_drop_pp: float = metrics.TOP1_DROP_PP) -> str:
    """The comparison as text, and a last line that counts what makes `compare` fail."""
    columns = list(COMPARE_COLUMNS)
    accuracy = {
        name: both
        for name, both in COMPARE_ACCURACY.items()
        if all(c in table for c in both)
        and (table[both[:2]].notna().all(axis=1) if name == "top1" else table[both[:2]].notna().any(axis=1)).any()
    }
    for both in accuracy.values():
        columns[columns.index("flag") : columns.index("flag")] = both
    if "regressed" in table and (table["regressed"] != "").any():
        columns.insert(columns.index("flag") + 1, "regressed")
    shown = _shown(table, columns).copy()
    shown["rel_delta"] = (100 * shown["rel_delta"]).round(1).map(lambda v: "" if pd.isna(v) else f"{v:+.1f}%")
    for column in ("throughput_img_s_a", "throughput_img_s_b", "delta"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:,.1f}")
    for column in ("top1_pct_a", "top1_pct_b", "time_to_target_s_a", "time_to_target_s_b"):
        if column in shown:
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:,.2f}")
    if "top1_delta_pp" in shown:
        shown["top1_delta_pp"] = shown["top1_delta_pp"].map(lambda v: "" if pd.isna(v) else f"{v:+.2f}")
    if "time_to_target_rel_delta" in shown:
        shown["time_to_target_rel_delta"] = shown["time_to_target_rel_delta"].map(
            lambda v: "" if pd.isna(v) else f"{100 * v:+.1f}%"
        )
    shown = shown.rename(
        columns={
            "throughput_img_s_a": "img/s A",
            "throughput_img_s_b": "img/s B",
            "num_repeats_a": "repeats A",
            "num_repeats_b": "repeats B",
            "top1_pct_a": "top-1 % A",
            "top1_pct_b": "top-1 % B",
            "top1_delta_pp": "top-1 pp",
            "time_to_target_s_a": "to target s A",
            "time_to_target_s_b": "to target s B",
            "time_to_target_rel_delta": "to target",
        }
    )
    counts = table["flag"].value_counts()
    said = ", ".join(f"{counts.get(flag, 0)} {flag}" for flag in FAILING_FLAGS)
    rules = f"throughput_img_s, B relative to A; a change counts beyond {threshold:.0%} and, with repeats, when the 95% confidence intervals do not overlap"
    if "top1" in accuracy:
        rules += f"; final top-1 lower by more than {top1_drop_pp:g} pp"
    if "target" in accuracy:
        rules += f"; time to target longer by more than {threshold:.0%}, or the target no longer reached"
    return shown.to_string(index=False, na_rep="") + f"\n\n{said} ({rules})"
