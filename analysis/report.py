"""`ddlbench report` and `ddlbench compare`: the sections of the analysis modules (analysis/<analysis>.py,
each with its metrics, figures and `draw(report)`), in SECTIONS' order, put into a markdown + static HTML
report (rendered by analysis/report_render.py), its figures drawn in worker processes; and `compare`'s text.
Nothing is computed here; this module assembles and writes files.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path

import matplotlib
import pandas as pd

from analysis import (
    accuracy,
    commbench,
    efficiency,
    excluded,
    hosts,
    interconnect,
    modes,
    overview,
    reference_overlay,
    scaling,
    stability,
    staging,
    stash,
    telemetry,
    time_shares,
    trace,
    utilisation,
)
from analysis.campaign_analysis import CampaignAnalysis
from analysis.campaigns import campaign_counts
from analysis.caveats import compared_marks, interfered_changes, mark_tables, notes
from analysis.cells import CELL
from analysis.compare import TOP1_DROP_PP
from analysis.container_images import compared_lines
from analysis.device import MIXED, device_of, rank_words
from analysis.load import Campaign, export_parquet, load_campaign, load_reference
from analysis.palette import PAPER_RC
from analysis.report_blocks import Block, Report, columns_shown
from analysis.report_render import render_html, render_markdown
from analysis.results import DEVICE_NAMES, column_names
from analysis.words import worded
from benchmarks.errors import ConfigError

FORMATS = ("png", "svg", "pdf")

# The report's sections in order: each adds what the campaign has the data for. Adding an analysis is a module
# analysis/<name>.py with its `draw(report)` and its place here.
SECTIONS: tuple[Callable[[Report], None], ...] = (
    overview.draw,
    scaling.draw,
    efficiency.draw,
    modes.draw,
    time_shares.draw,
    accuracy.draw,
    staging.draw,
    trace.draw,
    stability.draw,
    hosts.draw,
    stability.draw_loader_stalls,
    stability.draw_timeline,
    time_shares.draw_bars,
    reference_overlay.draw,
    stash.draw,
    utilisation.draw,
    telemetry.draw,
    commbench.draw,
    interconnect.draw,
    excluded.draw,
)


def fresh_dir(out: Path, option: str = "--out") -> Path:
    """out, made; refused where it holds anything (a report is never written over)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(
            f"{option} {out} already exists and is not empty (a report is never overwritten); "
            f"pass a new folder, e.g. {option} {out}-2"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def assemble(
    campaign: Campaign,
    *,
    reference: pd.DataFrame | None = None,
    reference_name: str | None = None,
    scaling: str = "weak",
    analysis: CampaignAnalysis | None = None,
) -> tuple[list[Block], dict]:
    """(report blocks, {figure name: Figure}) for one campaign: every analysis's section in turn
    (SECTIONS), each adding what the campaign has the data for; `analysis`: the campaign's, where the caller
    keeps one (its tables are computed once)."""
    analysis = analysis if analysis is not None else CampaignAnalysis(campaign.root, campaign=campaign)
    report = Report(campaign, analysis, reference=reference, reference_name=reference_name, scaling=scaling)
    for draw in SECTIONS:
        draw(report)
    if report.measured:
        mark_tables(report.blocks, report.cells, analysis.marks())  # oversubscribed, diverged: analysis.caveats
        for block in report.blocks:  # columns in the README's words, the ranks named for their device (words.py)
            if block.kind == "table" and isinstance(block.content, pd.DataFrame):
                block.content, renamed = worded(block.content, report.words, mode=report.scaling)
                block.key = tuple(renamed.get(c, c) for c in block.key)
                for old in sorted(renamed, key=lambda c: -len(str(c))):  # the longest first: _ci_low before its stem
                    if "_" in str(old):
                        block.note = block.note.replace(str(old), f"'{renamed[old]}'")
    return report.blocks, report.figures


_PENDING: dict = {}  # name -> draw callable, inherited by forked workers
PNG_DPI = 150


def _render(task: tuple[str, str, tuple[str, ...]]) -> tuple[str, list[str], float]:
    """Draw one figure and write it in each format; runs in a worker process (or inline)."""
    name, out, formats = task
    t = time.process_time()
    files = []
    with matplotlib.rc_context(PAPER_RC):
        fig = _PENDING[name]()
        # the figure's tight box (legends may reach past its edges), laid out once for every format:
        # savefig with bbox_inches="tight" lays the figure out again for each (14.4-16.2 -> 11.0-13.4 s
        # of CPU for the 14 figures of perf/analysis_speed.py's 1x report in PNG and SVG)
        fig.set_dpi(PNG_DPI)  # text measured as the PNG draws it
        fig.draw_without_rendering()
        box = fig.get_tightbbox().padded(matplotlib.rcParams["savefig.pad_inches"])
        for fmt in formats:
            path = Path(out) / "figures" / f"{name}.{fmt}"
            # PNGs are for the HTML page (150 dpi, fast zlib level); SVG/PDF are the print versions
            extra = {"dpi": PNG_DPI, "pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
            try:
                fig.savefig(path, format=fmt, bbox_inches=box, **extra)
            except OSError as error:  # matplotlib's names no file: the one line the user sees does (a full disk)
                raise OSError(error.errno, error.strerror or str(error), str(path)) from None
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
    out = fresh_dir(out)
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
    counts = campaign_counts(campaign.runs)
    named = ", ".join(f"{name} {n}" for name, n in counts.items())
    timings["campaigns"] = f" in {len(counts)} campaigns ({named})" if len(counts) > 1 else ""
    return timings


def compare_campaigns(
    a_dir: Path, b_dir: Path, *, threshold: float = 0.05, top1_drop_pp: float = TOP1_DROP_PP
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
    *CELL,
    "device",
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
# shown where some cell has them (analysis/efficiency.py: a GPU with a peak row; NVML's energy counter)
COMPARE_EFFICIENCY = {"mfu": ["mfu_a", "mfu_b"], "energy": ["energy_j_per_sample_a", "energy_j_per_sample_b"]}
FAILING_FLAGS = ("regression", "missing in B", "incomplete in B")


def format_compare(table: pd.DataFrame, *, threshold: float, top1_drop_pp: float = TOP1_DROP_PP) -> str:
    """The comparison as text, and a last line that counts what makes `compare` fail."""
    columns = list(COMPARE_COLUMNS)
    compared_accuracy = {
        name: both
        for name, both in COMPARE_ACCURACY.items()
        if all(c in table for c in both)
        and (table[both[:2]].notna().all(axis=1) if name == "top1" else table[both[:2]].notna().any(axis=1)).any()
    }
    for both in compared_accuracy.values():
        columns[columns.index("flag") : columns.index("flag")] = both
    for both in COMPARE_EFFICIENCY.values():
        if all(c in table for c in both) and table[both].notna().any(axis=None):
            columns[columns.index("flag") : columns.index("flag")] = both
    if "regressed" in table and (table["regressed"] != "").any():
        columns.insert(columns.index("flag") + 1, "regressed")
    words = rank_words(table)  # GPUs, or ranks (CPU): analysis.device, as `results` heads them
    table = table.assign(marks=compared_marks(table))
    if device_of(table) != MIXED:
        columns.remove("device")
    if table["marks"].astype(bool).any():
        columns.insert(columns.index("judged_by"), "marks")
    shown = columns_shown(table, columns).copy()
    if "device" in shown:
        shown["device"] = shown["device"].map(lambda d: DEVICE_NAMES.get(d, d))
    for column in ("num_repeats_a", "num_repeats_b"):  # a cell on one side only: blank, and integers
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else str(int(v)))
    shown["rel_delta"] = (100 * shown["rel_delta"]).round(1).map(lambda v: "" if pd.isna(v) else f"{v:+.1f}%")
    for column in ("throughput_img_s_a", "throughput_img_s_b", "delta"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:,.1f}")
    for column in ("top1_pct_a", "top1_pct_b", "time_to_target_s_a", "time_to_target_s_b"):
        if column in shown:
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:,.2f}")
    for column in ("mfu_a", "mfu_b"):
        if column in shown:
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.1%}")
    for column in ("energy_j_per_sample_a", "energy_j_per_sample_b"):
        if column in shown:
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.3g}")
    if "top1_delta_pp" in shown:
        shown["top1_delta_pp"] = shown["top1_delta_pp"].map(lambda v: "" if pd.isna(v) else f"{v:+.2f}")
    if "time_to_target_rel_delta" in shown:
        shown["time_to_target_rel_delta"] = shown["time_to_target_rel_delta"].map(
            lambda v: "" if pd.isna(v) else f"{100 * v:+.1f}%"
        )
    named = {k: v for k, v in column_names("weak", words).items() if k in CELL}
    shown = shown.rename(
        columns={
            **named,
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
            "mfu_a": "MFU A",
            "mfu_b": "MFU B",
            "energy_j_per_sample_a": "J/sample A",
            "energy_j_per_sample_b": "J/sample B",
        }
    )
    counts = table["flag"].value_counts()
    said = ", ".join(f"{counts.get(flag, 0)} {flag}" for flag in FAILING_FLAGS)
    rules = f"throughput_img_s, B relative to A; a change counts beyond {threshold:.0%} and, with repeats, when the 95% confidence intervals do not overlap"
    if "top1" in compared_accuracy:
        rules += f"; final top-1 lower by more than {top1_drop_pp:g} pp"
    if "target" in compared_accuracy:
        rules += f"; time to target longer by more than {threshold:.0%}, or the target no longer reached"
    lines = notes([*table["marks_a"], *table["marks_b"]]) if "marks_a" in table else []
    lines += interfered_changes(table)  # a change called on a shared or throttled cell says so
    lines += compared_lines(table)  # A and B, or paired cells, ran in different images (analysis.container_images)
    under = "\n\n" + "\n".join(lines) if lines else ""
    return shown.to_string(index=False, na_rep="") + under + f"\n\n{said} ({rules})"
