"""`ddlbench results [RUNS_DIR]`: the table of cells with scaling efficiency, and what was left out and why.

Built on CampaignAnalysis, as `report` and `compare` are: the same runs, the same figures. What it prints
fits WIDTH columns: the `variant` column (the settings that tell cells apart, which a sweep makes long)
becomes a label spelled out under the table when the table would be wider, and a failed run shows the
first line of its error (short_reason); `results --long` prints every variant in its column and every
error in full. Columns name the ranks by their device (analysis.device: "GPUs", or "ranks (CPU)"), a cell
of one repeat says that it has no interval, and an oversubscribed or diverged cell is marked (analysis.caveats),
each mark explained in a line under the table.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd

from analysis.campaign_analysis import CampaignAnalysis
from analysis.caveats import notes, short, with_marks
from analysis.device import GPU, MIXED, WORDS, RankWords, device_of, rank_words, with_device
from analysis.efficiency import why_none, with_efficiency
from analysis.staging import with_staging
from analysis.words import COLUMN_WORDS
from benchmarks.errors import ConfigError

WIDTH = 120  # the columns of a terminal that `results` fits (`--long` may be wider)
REASON_CHARS = 80  # a failure's first line is cut to this many characters, "…" where cut
WRAPPED_LINES = 3  # ddlbench's own reasons (incomplete, corrupt, unsupported) are wrapped to this many lines
FAILED = (
    "failed",
    "interrupted",
    "hung",
)  # the statuses whose summary.json holds an error (summary_schema.RETRIED_STATES)
# a C++ library's source location, [/__w/pytorch/.../gloo/transport/tcp/pair.cc:545]: where, not what
SOURCE_LOCATION = re.compile(r"\[[^\]\s]*[/\\][^\]\s]*:\d+\]\s*")
# an exception's name opening its message, "RuntimeError: "; a chain of them repeats it
EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Exit|Interrupt): ")
# analysis.load's reason of a failed run ends with the other ranks' errors (launchers/lifecycle/supervise.py)
RANKS_SAID = "; the ranks said: "

# the table's columns, in order, in the README's words (analysis.words, which the report's tables use too);
# `campaign` only where the folder holds several
COLUMNS = {
    k: COLUMN_WORDS[k]
    for k in (
        "campaign",
        "framework",
        "loader",
        "model",
        "precision",
        "device",
        "per_gpu_batch",
        "world_size",
        "num_nodes",
        "throughput_img_s",
        "interval",
        "per_gpu_img_s",
        "num_repeats",
        "efficiency",
        "baseline_gpus",
        "mfu",
        "energy_j_per_sample",
        "staging_s",
        "marks",
        "variant",
    )
}
ONE_REPEAT = "1 repeat: no interval"  # a cell run once: one run says nothing about its noise
DEVICE_NAMES = {"gpu": "GPU", "cpu": "CPU"}


def column_names(mode: str, words: RankWords) -> dict[str, str]:
    """The cell table's columns as `results` heads them, its ranks named for their device."""
    return {k: v.format(mode=mode, axis=words.axis, per=words.per) for k, v in COLUMNS.items()}


def results_table(
    root: Path, *, mode: str = "weak", analysis: CampaignAnalysis | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell with its efficiency and baseline, runs that were not counted with their reason and,
    for a failed or interrupted run, the error its summary.json holds in full: run_id, status, reason, error).
    A cell's ranks are named for its device (GPUs, ranks (CPU)); a campaign of both devices gets a `device`
    column. Where some cell has repeats, the throughput's 95% interval, "1 repeat: no interval" for the others."""
    analysis = analysis or CampaignAnalysis(root)
    excluded = analysis.excluded()
    runs = analysis.campaign.runs
    errors = dict(zip(runs["run_id"], runs["error"])) if "error" in runs else {}
    excluded["error"] = [
        error if status in FAILED and isinstance(error := errors.get(run_id), str) and error.strip() else None
        for run_id, status in zip(excluded["run_id"], excluded["status"])
    ]
    scaled = analysis.scaling(mode)
    if scaled.empty:
        names = column_names(mode, WORDS[GPU])
        hidden = ("campaign", "device", "interval", "mfu", "energy_j_per_sample", "staging_s")
        return pd.DataFrame(columns=[v for k, v in names.items() if k not in hidden]), excluded
    scaled = with_marks(with_device(scaled, analysis.counted()), analysis.marks())
    scaled = with_staging(with_efficiency(scaled, analysis.counted()), analysis.counted())
    words = rank_words(scaled)
    if device_of(scaled) == MIXED:
        scaled["device"] = scaled["device"].map(lambda d: DEVICE_NAMES.get(d, d))
    else:
        scaled = scaled.drop(columns="device")
    if (scaled["num_repeats"] > 1).any():
        scaled["interval"] = [
            ONE_REPEAT if n < 2 or pd.isna(low) else f"{low:,.1f}..{high:,.1f}"
            for n, low, high in zip(
                scaled["num_repeats"], scaled["throughput_img_s_ci_low"], scaled["throughput_img_s_ci_high"]
            )
        ]
    names = column_names(mode, words)
    table = scaled[[c for c in COLUMNS if c in scaled]].rename(columns=names)
    if names["baseline_gpus"] in table:
        table[names["baseline_gpus"]] = table[names["baseline_gpus"]].map(lambda v: "-" if pd.isna(v) else str(int(v)))
    if "campaign" in table and table["campaign"].nunique() < 2:
        table = table.drop(columns="campaign")  # one campaign: the header names none
    elif "campaign" in table:
        table = table.sort_values("campaign", kind="stable").reset_index(drop=True)  # each campaign's rows together
    if "variant" in table and not table["variant"].astype(bool).any():
        table = table.drop(columns="variant")  # every cell differs in a shown column already
    if not table["marks"].astype(bool).any():
        table = table.drop(columns="marks")  # nothing to read the figures with
    for column in ("mfu", "energy_j_per_sample", "staging_s"):  # narrow: only where some cell has one
        if names[column] in table and table[names[column]].isna().all():
            table = table.drop(columns=names[column])
    table.attrs["none_because"] = {
        f: r for f in ("mfu", "energy_j_per_sample") if (r := why_none(analysis.counted(), f))
    }
    return table, excluded


def table_words(table: pd.DataFrame) -> RankWords:
    """The rank words a results table was headed with (its rank-count column names them)."""
    return next((w for w in WORDS.values() if w.axis in table), WORDS[GPU])


def short_reason(text: str, *, limit: int = REASON_CHARS) -> str:
    """A failure as a table shows it: the first non-blank line of its error; where that line is a chain of
    exceptions (RuntimeError: ... callback: RuntimeError: Read error ...), the innermost, which says what
    went wrong; C++ source locations left out; at most `limit` characters, cut at a word's end, "…" where cut."""
    line = next((line for line in text.splitlines() if line.strip()), "")
    line = " ".join(SOURCE_LOCATION.sub("", line).split())
    if EXCEPTION.match(line):
        line = line[[*EXCEPTION.finditer(line)][-1].start() :]
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    if " " in cut[limit // 2 :]:  # at a word's end, where one ends in the second half
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def format_results(
    table: pd.DataFrame, excluded: pd.DataFrame, *, mode: str = "weak", long: bool = False, width: int = WIDTH
) -> str:
    """The cells table, what its efficiency means and the runs not counted, in `width` columns; `long`:
    every variant in its column and every reason and error in full, however wide."""
    if table.empty:
        text = "no completed runs"
    else:
        words = table_words(table)
        names = column_names(mode, words)
        text = _cells_text(table, mode=mode, width=None if long else width)
        text += "\n\n" + _fill(
            f"{mode} eff.: {mode}-scaling efficiency against the same configuration on '{names['baseline_gpus']}' "
            f"{words.many} (the smallest count of its curve); '-': no smaller count to compare with",
            width=None if long else width,
        )
        if "MFU" in table or "J/sample" in table:
            text += "\n" + _fill(
                "MFU: model FLOPs per sample x samples/s per GPU over the GPU's dense peak (benchmarks/peaks.py); "
                "J/sample: the GPUs' energy over the measured window (NVML) per sample; '-': none for that cell",
                width=None if long else width,
            )
        if "staging s" in table:
            text += "\n" + _fill(
                "staging s: seconds the slowest node took to copy the data set to its scratch (data.stage=node_local), "
                "inside each run's startup, not its img/s; '-': the cell read data.path itself",
                width=None if long else width,
            )
        for figure, reason in table.attrs.get("none_because", {}).items():
            what = "MFU" if figure == "mfu" else "energy"
            text += "\n" + _fill(f"no {what}: {reason}", width=None if long else width)
        for line in notes(table.get("marks", [])):
            text += "\n" + _fill(line, width=None if long else width)
        if "repeats" in table and (pd.to_numeric(table["repeats"], errors="coerce") < 2).all():
            text += "\n" + _fill(
                "repeats: every cell ran once (1 repeat: no interval), so nothing measures the run-to-run spread and "
                "a difference between cells may be noise; add a repeat with run.repeat=1 (then 2, ...)",
                width=None if long else width,
            )
    if not excluded.empty:
        text += "\n\n" + _excluded_text(excluded, long=long, width=width)
    return text


def _render(table: pd.DataFrame, *, mode: str) -> list[str]:
    rates = [c for c in table if c == "img/s" or c.startswith("img/s/")]
    text = table.to_string(
        index=False,
        na_rep="-",
        formatters={
            **{c: "{:,.1f}".format for c in rates},
            f"{mode} eff.": lambda v: "-" if pd.isna(v) else f"{v:.1%}",
            "MFU": lambda v: "-" if pd.isna(v) else f"{v:.1%}",
            "J/sample": lambda v: "-" if pd.isna(v) else f"{v:.3g}",
            "staging s": lambda v: "-" if pd.isna(v) else f"{v:.3g}",
            "marks": short,  # the words; notes() spells them out under the table
        },
    )
    return [line.rstrip() for line in text.splitlines()]


def _cells_text(table: pd.DataFrame, *, mode: str, width: int | None) -> str:
    """The table; wider than `width`, its variants become labels (v1, v2, ...) spelled out below it, and
    then the columns that hold one value in every row move to a line above it."""
    lines = _render(table, mode=mode)
    if width is None or max(map(len, lines)) <= width:
        return "\n".join(lines)
    above, below = [], []
    if "variant" in table:
        texts = [v for v in dict.fromkeys(table["variant"]) if v]
        labels = {v: f"v{i}" for i, v in enumerate(texts, 1)}
        table = table.assign(variant=table["variant"].map(lambda v: labels.get(v, "")))
        below = ["", "variant: the settings that tell these cells apart beyond the columns shown"]
        below += [_fill(text, width=width, first=f"  {labels[text]:<{len(labels[texts[-1]])}}  ") for text in texts]
        lines = _render(table, mode=mode)
    if max(map(len, lines)) > width:
        names = column_names(mode, table_words(table))
        figures = {names[k] for k in ("throughput_img_s", "interval", "per_gpu_img_s", "num_repeats", "efficiency")}
        figures |= {names["baseline_gpus"], names["mfu"], names["energy_j_per_sample"], "variant", "marks"}
        same = [c for c in table if c not in figures and table[c].astype("string").nunique(dropna=False) == 1]
        if same and len(same) < len(table.columns):
            above = [_fill("every row: " + ", ".join(f"{c} {table[c].iloc[0]}" for c in same), width=width), ""]
            lines = _render(table.drop(columns=same), mode=mode)
    return "\n".join([*above, *lines, *below])


def _fill(text: str, *, width: int | None, first: str = "") -> str:
    """text wrapped to `width` columns after `first`, its further lines under the text (not wrapped: None)."""
    if width is None:
        return first + text
    return textwrap.fill(
        text, width=width, initial_indent=first, subsequent_indent=" " * len(first), break_on_hyphens=False
    )


def _excluded_text(excluded: pd.DataFrame, *, long: bool, width: int) -> str:
    """Each run not counted: its status and run_id, under them its reason: a failure by the first line of
    its error (short_reason), ddlbench's own reasons wrapped; `long`: both in full."""
    status_width = max(len(str(s)) for s in excluded["status"])
    indent = " " * (2 + status_width + 2)
    lines = [f"not counted ({len(excluded)}):"]
    shortened = False
    for row in excluded.itertuples(index=False):
        status, reason = str(row.status), str(row.reason) if isinstance(row.reason, str) else ""
        lines.append(f"  {status:<{status_width}}  {row.run_id}")
        error = row.error if isinstance(row.error, str) else None
        if long:
            if error is None:
                lines.append(indent + reason)
                continue
            whole = [line.rstrip() for line in error.strip("\n").splitlines()]
            lines += [indent + line if line else "" for line in whole]
            if RANKS_SAID in reason:
                lines.append(indent + RANKS_SAID[2:] + reason.partition(RANKS_SAID)[2])
        elif status in FAILED:
            whole = error or reason.removeprefix(f"{status}: ")
            short = short_reason(whole)
            shortened |= short != whole.strip() or RANKS_SAID in reason
            lines.append(indent + short)
        else:
            wrap = {"width": max(width - len(indent), 20), "break_on_hyphens": False}
            wrapped = textwrap.wrap(reason, **wrap)
            if len(wrapped) > WRAPPED_LINES:
                wrapped = textwrap.wrap(reason, max_lines=WRAPPED_LINES, placeholder=" …", **wrap)
                shortened = True
            lines += [indent + line for line in wrapped]
    if shortened:
        lines.append(
            _fill(
                "(shortened: a failure shows the first line of its error; `ddlbench results --long` prints every "
                "reason in full)",
                width=width,
            )
        )
    return "\n".join(lines)


def export_tables(analysis: CampaignAnalysis, out: Path, *, fmt: str) -> list[Path]:
    """Write the computed tables (CampaignAnalysis.tables) as CSV or Parquet files into out (new or empty);
    Parquet adds the raw tables (analysis.load.export_parquet)."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--{fmt} {out} is not empty (never overwritten); pass a new folder")
    written = []
    if fmt == "parquet":  # the raw rows too: runs, steps, telemetry, commbench, problems
        from analysis.load import export_parquet

        written += export_parquet(analysis.campaign, out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in analysis.tables().items():
        path = out / f"{name}.{fmt}"
        if fmt == "csv":
            table.to_csv(path, index=False)
        else:
            from analysis.load import parquet_safe

            parquet_safe(table).to_parquet(path, index=False)
        written.append(path)
    return written
