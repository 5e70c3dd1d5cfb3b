"""A synthetic commbench.json: NCCL collectives at three sizes of job, and one node's GPU tests (the P2P
matrix and the concurrent host-to-device copies)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def write_commbench(path: Path, gpus_per_node: int) -> None:
    rows = []
    for world in (gpus_per_node, 8 * gpus_per_node, 64 * gpus_per_node):
        bw = 80e9 if world <= gpus_per_node else 10e9
        for op, factor in (("all_reduce", 2.0), ("all_gather", 1.0), ("reduce_scatter", 1.0)):
            bus = factor * (world - 1) / world
            for exp in range(10, 31, 2):
                size = 2**exp
                time_s = 25e-6 * math.log2(world) + bus * size / bw
                algbw = size / time_s / 1e9
                rows.append(
                    {
                        "op": op,
                        "size_bytes": size,
                        "algbw_gb_s": round(algbw, 4),
                        "busbw_gb_s": round(algbw * bus, 4),
                        "time_s": time_s,
                        "world_size": world,
                        "backend": "nccl",
                    }
                )
    rows += gpu_test_records(gpus_per_node)
    path.write_text(json.dumps(rows, indent=1))


P2P_GB_S = {1: 300.0, 2: 150.0}  # NVLink bandwidth by GPU distance |i - j|; farther pairs go through the host
P2P_HOST_GB_S, H2D_GB_S = 20.0, 24.0  # one GPU's host copy alone; H2D copies share the host's links


def gpu_test_records(num_gpus: int, *, host: str = "jwb0100") -> list[dict]:
    """benchmarks/commbench/gpu.py's records of one node: the concurrent host-to-device copies of its ranks
    (in rank order), then the P2P matrix (a 256 MiB copy and a 4-byte one per ordered pair; GPUs 1 or 2
    apart have peer access), as commbench's rank 0 writes them."""
    size, rows = 256 * 1024**2, []
    for gpu in range(num_gpus):
        bw = H2D_GB_S * min(1.0, 2 / num_gpus) * (1 - 0.02 * gpu)  # two GPUs saturate the host's links
        rows.append(_gpu_record("h2d_copy", num_gpus, size, bw, host, gpu=gpu, concurrent_gpus=num_gpus))
    for src in range(num_gpus):
        for dst in range(num_gpus):
            if src == dst:
                continue
            bw = P2P_GB_S.get(abs(src - dst), P2P_HOST_GB_S)
            extra = {"src_gpu": src, "dst_gpu": dst, "peer_access": bw != P2P_HOST_GB_S}
            rows.append(_gpu_record("p2p_copy", num_gpus, size, bw, host, **extra))
            rows.append(
                _gpu_record(
                    "p2p_latency", num_gpus, 4, 4 / (2e-6 if extra["peer_access"] else 9e-6) / 1e9, host, **extra
                )
            )
    return rows


def _gpu_record(op: str, world: int, size: int, bw_gb_s: float, host: str, **extra) -> dict:
    time_s = size / bw_gb_s / 1e9
    return {
        "op": op,
        "backend": "cuda",
        "world_size": world,
        "size_bytes": size,
        "time_s": time_s,
        "algbw_gb_s": bw_gb_s,
        "busbw_gb_s": bw_gb_s,
        **extra,
        "host": host,
    }
