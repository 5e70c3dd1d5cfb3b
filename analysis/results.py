"""`ddlbench results [RUNS_DIR]`: the table of cells with scaling efficiency, and what was left out and why.

Built on CampaignAnalysis, as `report` and `compare` are: the same runs, the same figures. What it prints
fits WIDTH columns: the `variant` column (the settings that tell cells apart, which a sweep makes long)
becomes a label spelled out under the table when the table would be wider, and a failed run shows the
first line of its error (short_reason); `results --long` prints every variant in its column and every
error in full.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd

from analysis.campaign_analysis import CampaignAnalysis
from benchmarks.errors import ConfigError

WIDTH = 120  # the columns of a terminal that `results` fits (`--long` may be wider)
REASON_CHARS = 80  # a failure's first line is cut to this many characters, "…" where cut
WRAPPED_LINES = 3  # ddlbench's own reasons (incomplete, corrupt, unsupported) are wrapped to this many lines
FAILED = ("failed", "interrupted", "hung")  # the statuses whose summary.json holds an error (rundir.RETRIED_STATES)
# a C++ library's source location, [/__w/pytorch/.../gloo/transport/tcp/pair.cc:545]: where, not what
SOURCE_LOCATION = re.compile(r"\[[^\]\s]*[/\\][^\]\s]*:\d+\]\s*")
# an exception's name opening its message, "RuntimeError: "; a chain of them repeats it
EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Exit|Interrupt): ")
# analysis.load's reason of a failed run ends with the other ranks' errors (launchers/supervise.py)
RANKS_SAID = "; the ranks said: "

COLUMNS = {
    "framework": "framework",
    "loader": "loader",
    "model": "model",
    "precision": "precision",
    "per_gpu_batch": "batch/GPU",
    "world_size": "GPUs",
    "num_nodes": "nodes",
    "throughput_img_s": "img/s",
    "per_gpu_img_s": "img/s/GPU",
    "num_repeats": "repeats",
    "efficiency": "{mode} eff.",
    "baseline_gpus": "vs GPUs",
    "variant": "variant",
}


def results_table(
    root: Path, *, mode: str = "weak", analysis: CampaignAnalysis | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per cell with its efficiency and baseline, runs that were not counted with their reason and,
    for a failed or interrupted run, the error its summary.json holds in full: run_id, status, reason, error)."""
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
        return pd.DataFrame(columns=[c.format(mode=mode) for c in COLUMNS.values()]), excluded
    table = scaled[[c for c in COLUMNS if c in scaled]].rename(
        columns={k: v.format(mode=mode) for k, v in COLUMNS.items()}
    )
    if "vs GPUs" in table:
        table["vs GPUs"] = table["vs GPUs"].map(lambda v: "-" if pd.isna(v) else str(int(v)))
    if "variant" in table and not table["variant"].astype(bool).any():
        table = table.drop(columns="variant")  # every cell differs in a shown column already
    return table, excluded


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
        text = _cells_text(table, mode=mode, width=None if long else width)
        text += "\n\n" + _fill(
            f"{mode} eff.: {mode}-scaling efficiency against the same configuration on 'vs GPUs' GPUs (the "
            "smallest GPU count of its curve); '-': no smaller GPU count to compare with",
            width=None if long else width,
        )
    if not excluded.empty:
        text += "\n\n" + _excluded_text(excluded, long=long, width=width)
    return text


def _render(table: pd.DataFrame, *, mode: str) -> list[str]:
    text = table.to_string(
        index=False,
        na_rep="-",
        formatters={
            "img/s": "{:,.1f}".format,
            "img/s/GPU": "{:,.1f}".format,
            f"{mode} eff.": lambda v: "-" if pd.isna(v) else f"{v:.1%}",
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
        figures = {"img/s", "img/s/GPU", "repeats", f"{mode} eff.", "vs GPUs", "variant"}
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
