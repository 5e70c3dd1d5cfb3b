"""`ddlbench preflight`, torch-free: who is paired with whom, the verdict and the table (docs/preflight.md).

Before a campaign spends its allocation, every node is measured once: its GEMM rate (TFLOP/s) on every GPU,
or on its CPU, and the all-reduce bandwidth between it and two partners (ring pairs (i, i+1), in rounds). A
node 5% or more below the median GEMM rate is slow; so is a link 5% or more below the reference bandwidth,
and a node whose every link to a partner not slow itself is slow. The measurement itself is
`python -m launchers.lifecycle.preflight` (one process per node, `__main__.py`, torch imported there);
launchers/lifecycle/preflight/__init__.py starts it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SLOW_FRACTION = 0.05  # 5% or more below the reference is slow
# the GEMM: a square matmul of a fixed size, the same on every node (bf16 on GPUs, fp32 on CPUs)
GPU_GEMM_N = 8192
CPU_GEMM_N = 512
# the all-reduce between two nodes: one buffer of this size, timed call by call
GPU_ALLREDUCE_BYTES = 256 * 2**20
CPU_ALLREDUCE_BYTES = 4 * 2**20
GEMM_SHARE = 0.4  # of the measuring time, where there are pairs; the rounds of all-reduce share the rest
MIN_TIMINGS = 3  # a median of at least this many timings, however short the time


def ring_rounds(num_nodes: int) -> list[list[tuple[int, int]]]:
    """The ring's pairs (i, i+1 mod n) in rounds of disjoint pairs, so that each node meets two partners (one
    where n = 2, none where n = 1): a slow node is then told from a slow link. An even ring takes 2 rounds, an
    odd one 3 (its last pair alone)."""
    if num_nodes < 2:
        return []
    if num_nodes == 2:
        return [[(0, 1)]]
    pairs = [(i, (i + 1) % num_nodes) for i in range(num_nodes)]
    if num_nodes % 2 == 0:
        return [pairs[0::2], pairs[1::2]]
    return [pairs[0 : num_nodes - 1 : 2], pairs[1 : num_nodes - 1 : 2], [pairs[-1]]]


def below(value: float, reference: float, fraction: float = SLOW_FRACTION) -> bool:
    """Whether value is `fraction` (5%) or more below reference."""
    return value <= reference * (1 - fraction)


def vs(value: float, reference: float) -> float:
    """value against reference, as a fraction: -0.25 is 25% below."""
    return value / reference - 1 if reference else 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the measurements say, node by node and link by link.

    gemm_median_tflops: the median over nodes of each node's GEMM rate (a node's rate is its slowest GPU's);
    link_reference_gb_s: the median over nodes of each node's fastest link (None without links): with 3 nodes
    a slow node's two links are two of the three, and the plain median of the links would be one of them;
    slow_gemm: the nodes 5% or more below the GEMM median; slow_links: the pairs 5% or more below the link
    reference; slow_network: the nodes whose every link (two at least) to a partner not in slow_gemm is slow: a
    link to a slow node says nothing of this one (a CPU-starved partner slows the link too), and the slow
    partner is excluded anyway."""

    gemm_median_tflops: float
    link_reference_gb_s: float | None
    slow_gemm: tuple[str, ...]
    slow_links: tuple[tuple[str, str], ...]
    slow_network: tuple[str, ...]

    @property
    def slow_nodes(self) -> tuple[str, ...]:
        """Every node named slow, for the GEMM or for its links: what `campaign submit` excludes."""
        return tuple(sorted({*self.slow_gemm, *self.slow_network}))

    def why(self, node: str) -> str:
        """'slow (GEMM; every link)', 'slow (GEMM)', 'slow (every link)' or 'ok'."""
        reasons = [r for r, names in (("GEMM", self.slow_gemm), ("every link", self.slow_network)) if node in names]
        return f"slow ({'; '.join(reasons)})" if reasons else "ok"


def verdict(gemm_tflops: Mapping[str, float], links_gb_s: Mapping[tuple[str, str], float]) -> Verdict:
    """The verdict on nodes (name -> GEMM TFLOP/s) and links ((a, b) -> all-reduce bus bandwidth GB/s)."""
    median = statistics.median(gemm_tflops.values()) if gemm_tflops else 0.0
    slow_gemm = tuple(node for node, rate in gemm_tflops.items() if below(rate, median))
    partners: dict[str, list[tuple[tuple[str, str], float]]] = {}
    for pair, bandwidth in links_gb_s.items():
        for node in pair:
            partners.setdefault(node, []).append((pair, bandwidth))
    if not partners:
        return Verdict(median, None, slow_gemm, (), ())
    reference = statistics.median(max(bw for _, bw in links) for links in partners.values())
    slow_links = tuple(pair for pair, bandwidth in links_gb_s.items() if below(bandwidth, reference))
    judged = {
        node: [bw for pair, bw in links if not any(p != node and p in slow_gemm for p in pair)]
        for node, links in partners.items()
    }
    slow_network = tuple(
        node for node, bws in judged.items() if len(bws) >= 2 and all(below(bw, reference) for bw in bws)
    )
    return Verdict(median, reference, slow_gemm, slow_links, slow_network)


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node's line of the table (and of the CSV)."""

    node: str
    gemm_tflops: float
    vs_median_pct: float
    links: str  # 'partner busbw GB/s (vs reference %)', ...
    verdict: str


def rows(
    gemm_tflops: Mapping[str, float], links_gb_s: Mapping[tuple[str, str], float], judged: Verdict
) -> list[NodeRow]:
    """The table's rows, nodes in the order measured."""
    out = []
    for node, rate in gemm_tflops.items():
        mine = [(b if a == node else a, bw) for (a, b), bw in links_gb_s.items() if node in (a, b)]
        reference = judged.link_reference_gb_s
        links = ", ".join(
            f"{partner} {bw:.3g} ({100 * vs(bw, reference):+.0f}%)" if reference else f"{partner} {bw:.3g}"
            for partner, bw in mine
        )
        out.append(NodeRow(node, rate, 100 * vs(rate, judged.gemm_median_tflops), links or "-", judged.why(node)))
    return out


def table(node_rows: Sequence[NodeRow], judged: Verdict) -> str:
    """The per-node table as printed, then one line per slow link."""
    header = ("node", "GEMM TFLOP/s", "vs median", "all-reduce busbw GB/s with partner (vs reference)", "verdict")
    lines = [header] + [
        (r.node, f"{r.gemm_tflops:.4g}", f"{r.vs_median_pct:+.1f}%", r.links, r.verdict) for r in node_rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines]
    text.append(
        f"GEMM median {judged.gemm_median_tflops:.4g} TFLOP/s"
        + (f"; link reference {judged.link_reference_gb_s:.3g} GB/s" if judged.link_reference_gb_s else "")
        + f"; slow: {SLOW_FRACTION:.0%} or more below"
    )
    text += [f"slow link: {a} - {b}" for a, b in judged.slow_links]
    return "\n".join(text)
