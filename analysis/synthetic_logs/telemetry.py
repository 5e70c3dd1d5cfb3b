"""telemetry_rank<R>.jsonl of a synthetic run, as benchmarks/telemetry.py writes them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from analysis.synthetic_logs.cells import SynthCell


def write_telemetry(
    run_dir: Path, cell: SynthCell, duration_s: float, rng: np.random.Generator, gpus_per_node: int
) -> None:
    """telemetry_rank<R>.jsonl as benchmarks/telemetry.py writes them (Unix t_s, units in the names)."""
    period = max(duration_s / 120, 0.1)
    busy = 0.93 if cell.loader == "dali" else 0.78
    start = 1_763_632_800.0  # 2025-11-20T10:00:00Z
    for rank in range(cell.world_size):
        t = start + rng.uniform(0, period) + np.arange(0, duration_s, period)  # ranks sample at their own times
        util = np.clip(100 * busy + rng.normal(0, 4, len(t)), 0, 100)
        util[: max(1, len(t) // 20)] = rng.uniform(5, 30)  # start-up
        mem = 31.0e9 + rng.normal(0, 0.1e9, len(t))
        cpu = np.clip((85 if cell.loader == "native" else 35) + rng.normal(0, 5, len(t)), 0, 100)
        # the fields below follow the drawn ones (no draws of their own: the other runs' numbers stay as they were)
        host_mem = 180e9 + 0.2e9 * cpu
        nvlink = 0.0 if cell.world_size == 1 else 0.4e9  # bytes/s per % util: gradients to the node's peers
        lines = [
            json.dumps(
                {
                    "t_s": round(float(ts), 3),
                    "rank": rank,
                    "host": f"jwb{0x100 + rank // gpus_per_node:04d}",
                    "gpu": rank % gpus_per_node,
                    "gpu_util_percent": round(float(util[i]), 1),
                    "gpu_mem_used_bytes": int(mem[i]),
                    "gpu_mem_total_bytes": 40_000_000_000,
                    "gpu_power_w": round(float(90 + 3 * util[i]), 1),
                    "cpu_percent": round(float(cpu[i]), 1),
                    "pcie_rx_bytes_s": round(float(util[i]) * 1e8, -3),
                    "pcie_tx_bytes_s": round(float(util[i]) * 1e7, -3),
                    "nvlink_rx_bytes_s": round(float(util[i]) * nvlink, -3),
                    "nvlink_tx_bytes_s": round(float(util[i]) * nvlink, -3),
                    "host_mem_used_bytes": int(host_mem[i]),
                    "host_mem_total_bytes": 512_000_000_000,
                },
                separators=(",", ":"),
            )
            for i, ts in enumerate(t)
        ]
        (run_dir / f"telemetry_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
