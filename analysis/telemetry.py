"""Telemetry timelines (NVML/psutil samples over a run's time): the figure and the report's section."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import finish, panels, paper_style
from analysis.report_blocks import Block, Report, add_figure

TELEMETRY_FIRST = [
    "gpu_util_percent",
    "gpu_util_pct",
    "gpu_mem_used_bytes",
    "gpu_mem_used_gb",
    "gpu_power_w",
    "power_w",
    "pcie_rx_bytes_s",
    "pcie_tx_bytes_s",
    "nvlink_rx_bytes_s",
    "cpu_percent",
    "cpu_util_pct",
    "proc_cpu_percent",
    "disk_read_bytes_s",
]

# identifiers, constants and running totals: not worth a timeline
_TELEMETRY_SKIP = {"t_s", "t_rel_s", "rank", "gpu", "local_rank", "pid", "disk_read_bytes"}


def _telemetry_metrics(rows: pd.DataFrame, limit: int) -> list[str]:
    numeric = [
        c
        for c in rows.columns
        if c not in _TELEMETRY_SKIP
        and not c.endswith("_total_bytes")
        and pd.api.types.is_numeric_dtype(rows[c])
        and rows[c].notna().any()
        and rows[c].nunique() > 1
    ]
    first = [c for c in TELEMETRY_FIRST if c in numeric]
    return (first + [c for c in numeric if c not in first])[:limit]


@paper_style
def telemetry_timeline(telemetry: pd.DataFrame, *, run_id: str, max_metrics: int = 6) -> Figure:
    """Telemetry fields over time for one run: mean over ranks/GPUs with the min-max band. Samples of
    different ranks are not simultaneous, so they are binned at the median sampling period."""
    rows = telemetry[telemetry["run_id"] == run_id]
    metrics = _telemetry_metrics(rows, max_metrics)
    fig, axes = panels(max(1, len(metrics)), ncols=2, row_height_in=1.6)
    if metrics:
        t = rows["t_s"].astype(float)
        t = t - t.min()  # Unix time or seconds since start: plotted from the run's first sample
        by_rank = rows["rank"] if "rank" in rows else pd.Series(0, index=rows.index)
        period = t.groupby(by_rank).diff().median()
        period = float(period) if period == period and period > 0 else 1.0
        bins = (t / period).round() * period
        grouped = rows[metrics].groupby(bins)
        mean, low, high = grouped.mean(), grouped.min(), grouped.max()
        for ax, metric in zip(axes, metrics):
            scale, unit = (1e-9, " (GB" + ("/s)" if metric.endswith("_s") else ")")) if "bytes" in metric else (1.0, "")
            ax.fill_between(
                mean.index,
                low[metric] * scale,
                high[metric] * scale,
                color="#0072B2",
                alpha=0.2,
                linewidth=0,
                label="min-max over ranks",
            )
            ax.plot(mean.index, mean[metric] * scale, color="#0072B2", label="mean over ranks")
            ax.set_title(metric.replace("_bytes_s", "").replace("_bytes", "") + unit)
            ax.set_xlabel("time since first sample (s)")
    return finish(fig, axes, title=f"Telemetry: {run_id}")


def measured_window(telemetry: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The telemetry samples inside their run's measured window (summary.json window_start_t_s ..
    window_end_t_s, Unix time); a run without the window (older summaries) keeps every sample."""
    if "window_start_t_s" not in runs or "window_end_t_s" not in runs or "t_s" not in telemetry:
        return telemetry
    ends = runs.set_index("run_id")[["window_start_t_s", "window_end_t_s"]].astype("float64")
    start = telemetry["run_id"].map(ends["window_start_t_s"])
    end = telemetry["run_id"].map(ends["window_end_t_s"])
    t = telemetry["t_s"].astype("float64")
    return telemetry[start.isna() | end.isna() | ((t >= start) & (t <= end))]


MAX_TELEMETRY_FIGURES = 2  # a timeline per run: a few are readable, hundreds are not


def _has_window(runs: pd.DataFrame, run_id: str) -> bool:
    if "window_start_t_s" not in runs:
        return False
    return bool(runs.loc[runs["run_id"] == run_id, "window_start_t_s"].notna().any())


def draw(report: Report) -> None:
    telemetry, runs = report.campaign.telemetry, report.campaign.runs
    if telemetry.empty or "t_s" not in telemetry:
        return
    telemetry = measured_window(telemetry, runs)
    if telemetry.empty:
        return
    report.blocks.append(Block("heading", "Telemetry"))
    # the runs with the most GPUs first: that is where stragglers and stalls show
    sizes = runs.set_index("run_id")["world_size"] if "world_size" in runs else pd.Series(dtype="float64")
    chosen = sorted(telemetry["run_id"].unique(), key=lambda r: (-float(sizes.get(r, 0) or 0), r))
    if len(chosen) > MAX_TELEMETRY_FIGURES:
        report.blocks.append(
            Block(
                "text",
                f"{len(chosen)} runs have telemetry; timelines of the "
                f"{MAX_TELEMETRY_FIGURES} with the most GPUs are shown.",
            )
        )
    for i, run_id in enumerate(chosen[:MAX_TELEMETRY_FIGURES]):
        add_figure(
            report.blocks,
            report.figures,
            f"telemetry_{i}",
            lambda run_id=run_id: telemetry_timeline(telemetry, run_id=run_id),
            f"Telemetry of {run_id}"
            + (
                ", its measured steps only."
                if _has_window(runs, run_id)
                else " (no measured window recorded: every sample)."
            ),
        )
