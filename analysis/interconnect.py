"""The GPU interconnect from `ddlbench commbench`'s GPU tests: the peer-to-peer bandwidth and latency matrix
and host-to-device bandwidth; the heatmap and bars; the report's section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.figures import finish, panels, paper_style
from analysis.palette import FULL_WIDTH_IN
from analysis.report_blocks import Block, Report, add_figure

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


P2P_OP, P2P_LATENCY_OP, H2D_OP = "p2p_copy", "p2p_latency", "h2d_copy"  # benchmarks/commbench/gpu.py's records
GPU_TEST_OPS = (P2P_OP, P2P_LATENCY_OP, H2D_OP)
P2P_COLUMNS = ["source", "host", "src_gpu", "dst_gpu", "peer_access", "p2p_gb_s", "p2p_latency_us"]
H2D_COLUMNS = ["source", "host", "rank", "gpu", "concurrent_gpus", "size_bytes", "h2d_gb_s"]


def _with(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """frame with every one of `columns` (null where the records lack the field)."""
    return frame.assign(**{c: pd.NA for c in columns if c not in frame})


def _index(values: pd.Series) -> pd.Series:
    """A GPU index or count as Int64: null where a record's value is no whole number >= 0."""
    numbers = pd.to_numeric(values, errors="coerce").astype("float64")
    return numbers.where((numbers >= 0) & (numbers == numbers.round()) & (numbers < 2**31)).astype("Int64")


def p2p_matrix(commbench: pd.DataFrame) -> pd.DataFrame:
    """The P2P copy matrix per commbench file (`source`) and host: per ordered GPU pair (src_gpu -> dst_gpu)
    the copy bandwidth p2p_gb_s (algbw of the large copy, GB = 1e9 B) and p2p_latency_us (the 4-byte copy's
    time), median over repeated records, and whether peer access was on."""
    if commbench.empty or "op" not in commbench or not (commbench["op"] == P2P_OP).any():
        return pd.DataFrame(columns=P2P_COLUMNS)
    frame = _with(commbench, ["host", "src_gpu", "dst_gpu", "peer_access", "source", "algbw_gb_s", "time_s"])
    frame = frame.assign(host=frame["host"].astype("string").fillna(""), source=frame["source"].astype("string"))
    frame = frame.assign(src_gpu=_index(frame["src_gpu"]), dst_gpu=_index(frame["dst_gpu"]))
    frame = frame.dropna(subset=["src_gpu", "dst_gpu"])
    key = ["source", "host", "src_gpu", "dst_gpu"]
    copies = frame[frame["op"] == P2P_OP]
    out = copies.groupby(key, sort=True).agg(peer_access=("peer_access", "first"), p2p_gb_s=("algbw_gb_s", "median"))
    latency = frame[frame["op"] == P2P_LATENCY_OP].groupby(key)["time_s"].median() * 1e6
    out["p2p_latency_us"] = latency.reindex(out.index)
    return out.reset_index()[P2P_COLUMNS]


def h2d_bandwidth(commbench: pd.DataFrame) -> pd.DataFrame:
    """Host-to-device copy bandwidth per GPU while every rank copies at once, per commbench file: one row per
    record (`rank`: its place in the file, which lists the ranks in order), its GPU, how many GPUs copied
    at the same time and h2d_gb_s (GB = 1e9 B)."""
    if commbench.empty or "op" not in commbench or not (commbench["op"] == H2D_OP).any():
        return pd.DataFrame(columns=H2D_COLUMNS)
    frame = _with(
        commbench[commbench["op"] == H2D_OP],
        ["host", "gpu", "concurrent_gpus", "source", "size_bytes", "world_size", "algbw_gb_s"],
    )
    frame = frame.assign(
        host=frame["host"].astype("string").fillna(""),
        source=frame["source"].astype("string"),
        rank=frame.groupby("source", sort=False).cumcount(),
        gpu=_index(frame["gpu"]),
        concurrent_gpus=_index(frame["concurrent_gpus"]).fillna(_index(frame["world_size"])),
        h2d_gb_s=frame["algbw_gb_s"],
    )
    return frame.sort_values(["source", "rank"]).reset_index(drop=True)[H2D_COLUMNS]


@paper_style
def p2p_heatmap(matrix: pd.DataFrame) -> Figure:
    """GPU-to-GPU copy bandwidth (GB/s), one heatmap per commbench file and host: rows the source GPU,
    columns the destination, each cell annotated with its GB/s (one colour scale over all panels); the
    diagonal (no copy) blank."""
    groups = list(matrix.groupby(["source", "host"], sort=True))
    fig, axes = panels(max(1, len(groups)), ncols=2, row_height_in=2.6, width_in=FULL_WIDTH_IN)
    top = float(matrix["p2p_gb_s"].max()) if matrix["p2p_gb_s"].notna().any() else 1.0
    for ax, ((source, host), rows) in zip(axes, groups):
        gpus = sorted({*rows["src_gpu"], *rows["dst_gpu"]})
        grid = rows.pivot_table(index="src_gpu", columns="dst_gpu", values="p2p_gb_s", aggfunc="median")
        grid = grid.reindex(index=gpus, columns=gpus)
        ax.imshow(grid.to_numpy(float), cmap="viridis", vmin=0, vmax=top)
        for i, src in enumerate(gpus):
            for j, dst in enumerate(gpus):
                value = grid.loc[src, dst]
                if value == value:
                    ax.text(
                        j,
                        i,
                        f"{value:.0f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if value < 0.6 * top else "black",
                    )
        ax.set_xticks(range(len(gpus)), [str(g) for g in gpus])
        ax.set_yticks(range(len(gpus)), [str(g) for g in gpus])
        ax.set_xlabel("destination GPU")
        ax.set_ylabel("source GPU")
        ax.grid(visible=False)
        ax.set_title(f"{host} ({source})" if host else str(source), fontsize=7)
    return finish(fig, axes, title="P2P copy bandwidth (GB/s)")


@paper_style
def h2d_bars(h2d: pd.DataFrame) -> Figure:
    """Host-to-device bandwidth per GPU with every rank copying at once: one bar per rank, one panel per
    commbench file."""
    groups = list(h2d.groupby("source", sort=True))
    widest = max((len(rows) for _, rows in groups), default=1)
    fig, axes = panels(
        max(1, len(groups)), ncols=1, row_height_in=2.0, width_in=min(FULL_WIDTH_IN, 1.6 + 0.35 * widest)
    )
    for ax, (source, rows) in zip(axes, groups):
        x = np.arange(len(rows))
        labels = [f"r{r.rank}\nGPU {'' if pd.isna(r.gpu) else int(r.gpu)}" for r in rows.itertuples(index=False)]
        bars = ax.bar(x, rows["h2d_gb_s"].to_numpy(float), 0.7, color="#0072B2")
        ax.bar_label(bars, fmt="%.1f", fontsize=6, padding=1)
        ax.set_xticks(x, labels, fontsize=6)
        ax.set_ylabel("GB/s")
        ax.margins(y=0.12)
        ax.grid(axis="x", visible=False)
        concurrent = rows["concurrent_gpus"].dropna()
        ax.set_title(
            f"{source}: {int(concurrent.max()) if len(concurrent) else len(rows)} GPUs copying at once", fontsize=7
        )
    return finish(fig, axes, title="Host-to-device bandwidth per GPU", xlabel_in=0.6)


def interconnect_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
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
        add_figure(
            blocks,
            figures,
            "p2p_matrix",
            lambda: p2p_heatmap(matrix),
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
        add_figure(
            blocks,
            figures,
            "h2d_bandwidth",
            lambda: h2d_bars(h2d),
            "Host-to-device copy bandwidth per rank, every rank copying at once.",
        )


def draw(report: Report) -> None:
    interconnect_section(report.blocks, report.figures, report.analysis)
