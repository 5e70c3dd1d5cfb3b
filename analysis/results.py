"""`ddlbench results RUNS_DIR`: the table of completed runs, and what was left out and why."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.load import load_runs
from analysis.metrics import weak_scaling

COLUMNS = {
    "framework": "framework", "loader": "loader", "model": "model", "precision": "precision",
    "per_gpu_batch": "batch/GPU", "world_size": "GPUs", "num_nodes": "nodes",
    "throughput_img_s": "img/s", "per_gpu_img_s": "img/s/GPU", "efficiency": "weak eff.", "num_repeats": "repeats",
}


def results_table(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scaling table of completed runs, runs that were not counted with their reason)."""
    runs = load_runs(root)
    if runs.empty:
        return pd.DataFrame(columns=list(COLUMNS.values())), runs
    completed = runs[runs["status"] == "completed"]
    excluded = runs[runs["status"] != "completed"][["cell", "status", "reason"]]
    if completed.empty:
        return pd.DataFrame(columns=list(COLUMNS.values())), excluded
    table = weak_scaling(completed)[list(COLUMNS)].rename(columns=COLUMNS)
    return table, excluded


def format_results(table: pd.DataFrame, excluded: pd.DataFrame) -> str:
    if table.empty:
        text = "no completed runs"
    else:
        text = table.to_string(index=False, formatters={
            "img/s": "{:,.1f}".format, "img/s/GPU": "{:,.1f}".format, "weak eff.": "{:.1%}".format,
        })
    if not excluded.empty:
        text += "\n\nnot counted:\n" + excluded.to_string(index=False)
    return text
