"""commbench's GPU tests: the P2P copy matrix and concurrent host-to-device copies."""

from __future__ import annotations

from analysis import plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.sections.base import Block, Report, add_figure


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
        add_figure(
            blocks,
            figures,
            "h2d_bandwidth",
            lambda: plots.h2d_bars(h2d),
            "Host-to-device copy bandwidth per rank, every rank copying at once.",
        )


def draw(report: Report) -> None:
    interconnect_section(report.blocks, report.figures, report.analysis)
