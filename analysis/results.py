"""`ddlbench results RUNS_DIR`: the table of cells with scaling efficiency, and what was left out and why.

Built on CampaignAnalysis, as `report` and `compare` are: the same runs, the same figures.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.campaign_analysis import CampaignAnalysis
from benchmarks.errors import ConfigError

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
    """(one row per cell with its efficiency and baseline, runs that were not counted with their reason)."""
    analysis = analysis or CampaignAnalysis(root)
    excluded = analysis.excluded()
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


def format_results(table: pd.DataFrame, excluded: pd.DataFrame, *, mode: str = "weak") -> str:
    if table.empty:
        text = "no completed runs"
    else:
        text = table.to_string(
            index=False,
            na_rep="-",
            formatters={
                "img/s": "{:,.1f}".format,
                "img/s/GPU": "{:,.1f}".format,
                f"{mode} eff.": lambda v: "-" if pd.isna(v) else f"{v:.1%}",
            },
        )
        text += (
            f"\n\n{mode} eff.: {mode}-scaling efficiency against the same configuration on 'vs GPUs' GPUs (the "
            "smallest GPU count of its curve); '-': no smaller GPU count to compare with"
        )
    if not excluded.empty:
        text += f"\n\nnot counted ({len(excluded)}):\n" + excluded.to_string(index=False)
    return text


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
            from analysis.load import _parquet_safe

            _parquet_safe(table).to_parquet(path, index=False)
        written.append(path)
    return written
