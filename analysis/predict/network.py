"""The network of `ddlbench predict`: a collective's time on n ranks, from commbench's own times where it
measured that op on n ranks, else from a level's latency and bus bandwidth (fitted to commbench or the system
profile's `network` block). docs/predict.md."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.errors import ConfigError

GB = 1e9

# --- collectives ---------------------------------------------------------------------------------

# nccl-tests' bus factors (docs/commbench.md) and the latency steps of a tree: all_reduce reduces up and
# broadcasts down (two phases), reduce_scatter and all_gather are one phase each
BUS_FACTOR = {
    "broadcast": lambda n: 1.0,
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
}
LATENCY_STEPS = {
    "broadcast": lambda n: math.ceil(math.log2(n)),
    "all_reduce": lambda n: 2 * math.ceil(math.log2(n)),
    "reduce_scatter": lambda n: math.ceil(math.log2(n)),
    "all_gather": lambda n: math.ceil(math.log2(n)),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Level:
    """One level of the network: its latency per step and its bus bandwidth (nccl-tests' busbw)."""

    latency_s: float
    busbw_gb_s: float
    source: str = ""

    def describe(self) -> str:
        return f"{self.busbw_gb_s:.3g} GB/s busbw, {self.latency_s * 1e6:.3g} us per latency step ({self.source})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    """Measured times of one op on one world size, by size (commbench): read between its sizes."""

    sizes_bytes: tuple[float, ...]
    times_s: tuple[float, ...]

    def covers(self, size_bytes: float) -> bool:
        return self.sizes_bytes[0] <= size_bytes <= self.sizes_bytes[-1]

    def time_s(self, size_bytes: float) -> float:
        """Log-log interpolation between the two measured sizes around size_bytes."""
        x = np.log(np.asarray(self.sizes_bytes))
        y = np.log(np.asarray(self.times_s))
        return float(np.exp(np.interp(math.log(size_bytes), x, y)))


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    intra: Level | None  # up to gpus_per_node ranks (one node)
    inter: Level | None  # across nodes
    gpus_per_node: int
    # (op, world size) -> commbench's own times: used within their sizes, the levels' model elsewhere
    measured: Mapping[tuple[str, int], Curve] = field(default_factory=dict)

    def level(self, world: int) -> Level:
        node = world <= self.gpus_per_node
        found = self.intra if node else self.inter
        if found is None:
            where = "inside a node" if node else "across nodes"
            raise ConfigError(
                f"--gpus {world}: no network level {where} (gpus_per_node={self.gpus_per_node}); pass "
                f"--commbench with all_reduce measurements {where}, or a system with a network block "
                "(conf/system/juwels_booster.yaml has one)"
            )
        return found

    def collective_s(self, op: str, size_bytes: float, world: int) -> float:
        if world <= 1 or size_bytes <= 0:
            return 0.0
        curve = self.measured.get((op, world))
        if curve is not None and curve.covers(size_bytes):
            return curve.time_s(size_bytes)
        level = self.level(world)
        return level.latency_s * LATENCY_STEPS[op](world) + BUS_FACTOR[op](world) * size_bytes / (level.busbw_gb_s * GB)


def fit_level(records: pd.DataFrame, *, source: str) -> Level:
    """Latency and busbw that fit measured collective times best in relative terms (weighted least
    squares of time = latency * steps + factor * bytes / busbw, both >= 0). records: op, world_size,
    size_bytes, time_s (commbench's JSON)."""
    rows = records[(records["world_size"] > 1) & (records["time_s"] > 0) & records["op"].isin(list(BUS_FACTOR))]
    if len(rows) < 2:
        raise ConfigError(
            f"{source}: {len(rows)} usable collective time(s) to fit latency and bandwidth to; run commbench over "
            "a range of sizes (ddlbench commbench --nproc N, the default sizes)"
        )
    steps = np.array([LATENCY_STEPS[op](n) for op, n in zip(rows["op"], rows["world_size"])], dtype=float)
    volume = np.array(
        [BUS_FACTOR[op](n) * s for op, n, s in zip(rows["op"], rows["world_size"], rows["size_bytes"])], dtype=float
    )
    t = rows["time_s"].to_numpy(dtype=float)
    a = np.column_stack([steps, volume]) / t[:, None]
    (latency, inverse_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if latency < 0:  # bandwidth alone
        latency, inverse_bw = 0.0, float(np.sum(volume / t) / np.sum((volume / t) ** 2))
    if inverse_bw <= 0:  # latency alone: the sizes were too small to show the bandwidth
        raise ConfigError(
            f"{source}: the collective times do not grow with the size, so no bandwidth can be fitted; measure "
            "larger sizes (commbench --max-bytes 67108864 or more)"
        )
    return Level(latency_s=float(latency), busbw_gb_s=float(1.0 / inverse_bw / GB), source=source)


def network_from_commbench(
    commbench: pd.DataFrame, *, gpus_per_node: int, fallback: Network | None = None, backend: str | None = None
) -> Network:
    """Fit each level to commbench's out-of-place all_reduce times: one node (num_nodes 1, or a world
    size within gpus_per_node where files lack num_nodes) and several; a level without measurements
    comes from `fallback` (the system profile's)."""
    rows = commbench[(commbench["op"] == "all_reduce") & (commbench["world_size"] > 1)]
    if "in_place" in rows:
        rows = rows[rows["in_place"].fillna(False).astype(bool) == False]  # noqa: E712 (a nullable column)
    if backend is not None:
        rows = rows[rows["backend"] == backend]
    nodes = rows["num_nodes"] if "num_nodes" in rows else pd.Series(np.nan, index=rows.index)
    one_node = nodes.fillna((rows["world_size"] <= gpus_per_node).map({True: 1, False: 2})) == 1
    levels = {}
    for name, part in (("intra", rows[one_node]), ("inter", rows[~one_node])):
        sources = sorted(set(part["source"].astype(str))) if "source" in part else []
        levels[name] = (
            fit_level(part, source="commbench " + ", ".join(sources))
            if len(part)
            else (getattr(fallback, name) if fallback else None)
        )
    return Network(
        intra=levels["intra"], inter=levels["inter"], gpus_per_node=gpus_per_node, measured=curves(commbench, backend)
    )


def curves(commbench: pd.DataFrame, backend: str | None = None) -> dict[tuple[str, int], Curve]:
    """commbench's out-of-place times per (op, world size): the median over files at each size."""
    rows = commbench[commbench["op"].isin(list(BUS_FACTOR)) & (commbench["world_size"] > 1)]
    if "in_place" in rows:
        rows = rows[rows["in_place"].fillna(False).astype(bool) == False]  # noqa: E712
    if backend is not None:
        rows = rows[rows["backend"] == backend]
    out = {}
    for (op, world), part in rows.groupby(["op", "world_size"]):
        by_size = part.groupby("size_bytes")["time_s"].median().sort_index()
        by_size = by_size[by_size > 0]
        if len(by_size) >= 2:
            out[(str(op), int(world))] = Curve(
                sizes_bytes=tuple(float(v) for v in by_size.index), times_s=tuple(float(v) for v in by_size)
            )
    return out


def network_from_profile(system: Mapping[str, Any]) -> Network | None:
    """The system profile's `network` block: {intra,inter}_{busbw_gb_s,latency_us}; None without one."""
    block = system.get("network") or {}
    if not block:
        return None
    name = system.get("name", "system")

    def level(prefix: str) -> Level | None:
        bw, lat = block.get(f"{prefix}_busbw_gb_s"), block.get(f"{prefix}_latency_us")
        if bw is None:
            return None
        return Level(latency_s=float(lat or 0.0) * 1e-6, busbw_gb_s=float(bw), source=f"system={name} profile")

    return Network(intra=level("intra"), inter=level("inter"), gpus_per_node=max(1, int(system["gpus_per_node"] or 1)))
