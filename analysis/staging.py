"""Node-local staging (data.stage=node_local, docs/staging.md): how long each node count's runs spent copying the data
set to the nodes' scratch and at what rate per node (summary.json: staging_s, the slowest node's; staging_bytes;
staging_gb_s_per_node), its table and, over several node counts, its figure. Shown only when the campaign has staged
runs. The copy is part of each run's startup_s and so of the time to train (analysis/accuracy.py)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from analysis.cells import cell_key
from analysis.figures import finish, panels, paper_style
from analysis.report_blocks import Block, Report, add_figure

FIELDS = ["staging_s", "staging_gb_s_per_node", "staging_bytes", "startup_s"]
DATA_SET = "config.data.path"  # the staged folder: runs of two data sets are never averaged together
# where it was staged (/dev/shm, an NVMe's $TMPDIR): not part of the cell, but two scratches copy at two rates
SCRATCH = "config.system.local_scratch"
COLUMNS = [
    "data_set",
    "scratch",
    "num_nodes",
    "num_runs",
    "staging_s",
    "staging_max_s",
    "staging_gb_s_per_node",
    "staged_gb",
    "startup_s",
]
GB = 1e9


def staging_by_nodes(runs: pd.DataFrame) -> pd.DataFrame:
    """Per data set (data.path) and node count, over the staged runs (staging_s present): how many, the mean and
    largest staging_s (each the slowest node's), the mean GB/s per node (the slowest node's), the data set's GB per
    node and the mean startup_s that holds the copy. Empty (COLUMNS) without staged runs."""
    if "staging_s" not in runs or "num_nodes" not in runs:
        return pd.DataFrame(columns=COLUMNS)
    rows = runs.reindex(columns=["num_nodes", *FIELDS]).copy()
    rows["data_set"] = runs[DATA_SET].astype("string").fillna("?") if DATA_SET in runs else "?"
    rows["scratch"] = runs[SCRATCH].astype("string").fillna("?") if SCRATCH in runs else "?"
    for column in FIELDS:
        rows[column] = pd.to_numeric(rows[column], errors="coerce").astype("float64")
    rows = rows[rows["staging_s"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS)
    grouped = rows.groupby(["data_set", "scratch", "num_nodes"], observed=True)
    out = pd.DataFrame(
        {
            "num_runs": grouped["staging_s"].size(),
            "staging_s": grouped["staging_s"].mean(),
            "staging_max_s": grouped["staging_s"].max(),
            "staging_gb_s_per_node": grouped["staging_gb_s_per_node"].mean(),
            "staged_gb": grouped["staging_bytes"].mean() / GB,
            "startup_s": grouped["startup_s"].mean(),
        }
    ).reset_index()
    return out[COLUMNS]


def with_staging(cell_table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """cell_table with each cell's mean staging_s over its runs (the slowest node's copy; NaN for a cell that
    did not stage), as `results` shows it beside the throughput."""
    by = cell_key(cell_table)
    if "staging_s" not in runs or runs.empty or not set(by) <= set(runs):
        return cell_table.assign(staging_s=float("nan"))
    present = runs.reindex(columns=[*by, "staging_s"])
    present["staging_s"] = pd.to_numeric(present["staging_s"], errors="coerce").astype("float64")
    means = present.groupby(by, dropna=False, observed=True)["staging_s"].mean().reset_index()
    return cell_table.merge(means, on=by, how="left")


@paper_style
def staging_vs_nodes(table: pd.DataFrame) -> Figure:
    """Staging seconds and GB/s per node against the node count."""
    fig, axes = panels(2, ncols=2)
    curves = table.groupby(["data_set", "scratch"], sort=False)
    several = curves.ngroups > 1
    for ax, column, title in zip(
        axes, ("staging_s", "staging_gb_s_per_node"), ("staging time (s, slowest node)", "GB/s per node")
    ):
        for (data_set, scratch), rows in curves:
            label = f"{data_set} to {scratch}" if several else None
            ax.plot(rows["num_nodes"], rows[column], marker="o", label=label)
        ax.set_xlabel("nodes")
        ax.set_xscale("log", base=2)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
    return finish(fig, axes, title="Node-local staging")


def draw(report: Report) -> None:
    table = staging_by_nodes(report.counted)
    if table.empty:
        return
    report.blocks.append(Block("heading", "Node-local staging"))
    note = (
        "data.stage=node_local: at each run's start one process per node copied the data set to the node's "
        "system.local_scratch (scratch) and every rank waited for the slowest node. staging_s: that node's seconds (mean over "
        "the runs; staging_max_s the largest); staging_gb_s_per_node: its rate; staged_gb: the data set per node. "
        "The copy is inside startup_s, and so inside the time to train (startup_s + time_to_target_s), as MLPerf "
        "HPC counts staging."
    )
    report.blocks.append(Block("table", table.round(3), note=note, key=("num_nodes", "staging_s")))
    if table.groupby(["data_set", "scratch"])["num_nodes"].nunique().max() > 1:
        add_figure(
            report.blocks,
            report.figures,
            "staging_vs_nodes",
            lambda: staging_vs_nodes(table),
            "Staging time (the slowest node) and GB/s per node against the node count.",
        )
