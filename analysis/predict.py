"""`ddlbench predict`: one training step at any GPU count, from measured parts (docs/predict.md).

A data-parallel step on n GPUs (weak scaling: the per-GPU batch stays) is modelled as

    step(n) = data + fwd + bwd + opt + other + sync(n) + exposed(n) + after(n)

- fwd, bwd, opt, other: one rank's means over the measured steps of a calibration run (`Parts`, from a
  1-GPU run as a rule), the same at every n;
- data(n): the data path. One rank's loader delivers `loader_img_s` (measured: a calibration run fed by
  that loader delivered at least a batch per mean step; or `ddlbench loaderbench` on the machine
  predicted), a node's GPUs x that. The rank waits for a batch when its loader needs longer for one
  than the rest of the step takes: step = max(rest, per_gpu_batch / loader_img_s);
- sync(n) = hypot(jitter, data jitter) * e(n): in synchronous training every collective waits for the
  slowest rank. With each rank's compute and data time per step varying independently (measured: their
  spreads in the calibration run), the slowest of n is late by e(n) times their joint standard
  deviation on average, e(n) being the expected maximum of n standard normal samples. A trace shows
  that wait as collective time, and so does this breakdown. Where the loader's own pace is measured (the
  seconds between its batches: loaderbench's, or a calibration run's that waited for it), data(n) and
  sync(n) are simulated instead (simulate_steps): every rank's loader, its workers and queue, against
  the others' at each step's first collective;
- exposed(n): the gradient messages (benchmarks/gradients.py: sizes and when backward completes them)
  go out one after another as they become ready, each taking `Network.collective_s`; what runs past
  the end of backward is exposed. Messages a framework sends only after backward (DeepSpeed ZeRO-0)
  are all exposed, and after(n) is what it sends after the optimizer step (ZeRO-1/2's all-gather);
- a collective on n ranks takes commbench's own time where commbench measured that op on n ranks
  (log-log between its sizes), else latency_s * (latency steps) + bus factor * bytes / busbw, with
  nccl-tests' bus factors (2(n-1)/n for all_reduce) and log2(n) latency steps per phase (a tree). The
  bandwidth and latency are the intra-node level's up to system.gpus_per_node GPUs, the inter-node
  level's beyond (the ring's slowest link). Both are fitted to commbench measurements
  (`fit_level`) or given by the system profile's `network` block.

Shares are reported as time_shares.breakdown defines them for measured runs: allreduce = sync + exposed
+ after (what a rank's timer sees as waiting on communication), compute = fwd + bwd + opt, data,
other. Everything here is arithmetic on plain numbers and DataFrames; building the model for its
gradient layout (torch) happens in benchmarks/gradients.py.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import framework_config

GB = 1e9


@functools.lru_cache(maxsize=None)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normal samples]: the integral of x n phi(x) Phi(x)^(n-1), by the
    trapezoid rule on [-12, 12] (exact to 1e-6 for any n this suite meets)."""
    if n <= 1:
        return 0.0
    x = np.linspace(-12.0, 12.0, 24001)
    cdf = 0.5 * (1.0 + np.frompyfunc(math.erf, 1, 1)(x / math.sqrt(2.0)).astype(float))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return float(np.trapezoid(x * n * pdf * cdf ** (n - 1), x))


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


# --- what one rank does ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """One rank's step, measured: means over the calibration run's measured steps and ranks."""

    fwd_s: float
    bwd_s: float  # backward compute, without the exposed wait for its last message
    opt_s: float
    data_s: float  # the wait for a batch that is ready (handing it over); waiting for the loader: loader_img_s
    other_s: float
    # standard deviation of a rank's compute per step (step minus exposed communication minus data): between
    # the ranks at the same step where the run has several, over the steps where it has one
    jitter_s: float
    per_gpu_batch: int
    source: str
    sample_unit: str = "images"
    # the data path: what one rank's loader delivers (inf: never waited for), the spread of its data time
    # (measured alike), which loader and where both come from
    loader_img_s: float = math.inf
    data_jitter_s: float = 0.0
    loader: str = ""
    data_source: str = ""
    # the loader as `ddlbench loaderbench` measured it alone: the seconds between the batches it delivered, how
    # many batches it makes at once (DataLoader workers; 1 for a DALI pipeline) and how many it prepares ahead.
    # Set, the data path and the wait for the slowest rank are simulated (simulate_steps); empty, they are the
    # closed form of step()
    loader_intervals_s: tuple[float, ...] = ()
    loader_makers: int = 1
    loader_queue: int = 0

    def maker_batch_s(self) -> np.ndarray:
        """The seconds one maker (a worker) takes for a batch, from the intervals: with W makers in turn, batch
        k comes W intervals after batch k - W, which the same maker made (every W consecutive intervals summed)."""
        intervals = np.asarray(self.loader_intervals_s, dtype=float)
        w = max(1, min(self.loader_makers, len(intervals)))
        return np.convolve(intervals, np.ones(w), mode="valid")

    @property
    def compute_s(self) -> float:
        return self.fwd_s + self.bwd_s + self.opt_s

    @property
    def batch_s(self) -> float:
        """The seconds one rank's loader takes for one batch (0: as fast as asked)."""
        return self.per_gpu_batch / self.loader_img_s

    def with_loader(
        self,
        *,
        loader: str,
        img_s: float,
        source: str,
        intervals_s: Sequence[float] = (),
        makers: int = 1,
        queue: int = 0,
    ) -> Parts:
        """The data path of another loader, from its measurement alone (`ddlbench loaderbench`): its rate per
        rank, the seconds between its batches, its makers and its queue. The handover stays the calibration
        run's; the calibration's data-time spread, a synthetic loader's, gives way to the intervals' where they
        are given."""
        return replace(
            self,
            loader=loader,
            loader_img_s=img_s,
            data_source=source,
            loader_intervals_s=tuple(float(v) for v in intervals_s),
            loader_makers=max(1, int(makers)),
            loader_queue=int(queue),
            data_jitter_s=0.0 if intervals_s else self.data_jitter_s,
        )

    def scaled(self, factor: float) -> Parts:
        """Compute (and its jitter) on a GPU `factor` times slower; data and other stay."""
        return replace(
            self,
            fwd_s=self.fwd_s * factor,
            bwd_s=self.bwd_s * factor,
            opt_s=self.opt_s * factor,
            jitter_s=self.jitter_s * factor,
            source=f"{self.source}, compute x {factor:g}",
        )


def spread(values: pd.Series, rows: pd.DataFrame) -> float:
    """The standard deviation that makes ranks wait for each other: between the ranks at the same step where
    the rows hold several ranks (a slowdown of every rank at once, from the machine, makes nobody wait), over
    the steps where they hold one (an upper bound: it holds the machine's common noise too)."""
    rank = rows["rank"] if "rank" in rows else pd.Series(0, index=rows.index)
    if rank.nunique() > 1 and "step" in rows:
        by_step = values.groupby(rows["step"])
        deviation = values - by_step.transform("mean")
        dof = (by_step.transform("size") - 1).groupby(rows["step"]).first().sum()
        return math.sqrt(float((deviation**2).sum()) / dof) if dof > 0 else 0.0
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0


def measured_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """A run's measured step rows: neither warm-up nor profiled (the trace window's steps run slower)."""
    rows = steps[~steps["warmup"].astype(bool)]
    return rows[~rows["profiled"].fillna(False).astype(bool)] if "profiled" in rows else rows


def parts_from_steps(
    steps: pd.DataFrame, *, per_gpu_batch: int, source: str, sample_unit: str = "images", loader: str = ""
) -> Parts:
    """Parts of one run from its measured step rows (every rank's). Its loader delivered a batch at least
    every mean step: that is taken as its capacity, with no separate handover, so that the model gives the
    measured data time back on the run's own size and less where the rest of the step grows (the loader
    works on while the rank computes and communicates). loader=synthetic has no capacity: its data time
    is the handover it measured, at every size."""
    rows = measured_steps(steps)
    if rows.empty:
        raise ConfigError(f"{source}: no measured step to calibrate from; pass a completed run (--from RUN_DIR)")

    def col(name: str) -> pd.Series:
        return rows[name].astype(float).fillna(0.0) if name in rows else pd.Series(0.0, index=rows.index)

    exposed = col("comm_exposed_s")
    bwd = col("bwd_s")
    # the exposed wait sits in backward (DDP waits for its last bucket there) or, where backward is
    # shorter than it, in the optimizer step (Horovod's synchronize)
    in_bwd = np.minimum(exposed, bwd)
    bwd_compute, opt_compute = bwd - in_bwd, col("opt_s") - (exposed - in_bwd)
    other = (col("step_s") - col("data_s") - col("fwd_s") - bwd - col("opt_s")).clip(lower=0.0)
    step_s = float(col("step_s").mean())
    # the synthetic loader makes its batches on the device: no capacity, only the handover it measured
    unbounded = loader == "synthetic" or step_s <= 0
    return Parts(
        fwd_s=float(col("fwd_s").mean()),
        bwd_s=float(bwd_compute.mean()),
        opt_s=float(opt_compute.clip(lower=0.0).mean()),
        data_s=float(col("data_s").mean()) if unbounded else 0.0,
        other_s=float(other.mean()),
        jitter_s=spread(col("step_s") - exposed - col("data_s"), rows),
        per_gpu_batch=per_gpu_batch,
        source=source,
        sample_unit=sample_unit,
        loader_img_s=math.inf if unbounded else per_gpu_batch / step_s,
        data_jitter_s=spread(col("data_s"), rows),
        loader=loader,
        data_source=source,
    )


# a calibration run waited for its loader where its mean data time is at least this share of its mean step: its
# batches' arrivals then show the loader's own pace (LOADER_BOUND_SHARE x the step is far above a handover)
LOADER_BOUND_SHARE = 0.05


def arrival_intervals(steps: pd.DataFrame) -> tuple[float, ...]:
    """The seconds between the batches a run's loader delivered, as its ranks received them: batch k arrived
    data_s_k after step k began, so between consecutive steps k-1, k of one rank it is step_s_(k-1) -
    data_s_(k-1) + data_s_k. Only a run that waited for its loader (loader_bound) shows the loader's pace this
    way; in one that did not, a batch was there before the rank asked, and these are the steps' times.
    steps: a run's measured rows (rank, step, step_s, data_s)."""
    out: list[float] = []
    rank = steps["rank"] if "rank" in steps else pd.Series(0, index=steps.index)
    for _, rows in steps.groupby(rank):
        rows = rows.sort_values("step")
        step, data = rows["step_s"].to_numpy(float), rows["data_s"].fillna(0.0).to_numpy(float)
        follows = np.diff(rows["step"].to_numpy()) == 1  # warm-up and profiled steps leave gaps
        out += [float(v) for v in (step[:-1] - data[:-1] + data[1:])[follows] if v > 0]
    return tuple(out)


def loader_bound(steps: pd.DataFrame) -> bool:
    """The run waited for its loader: mean data time >= LOADER_BOUND_SHARE of the mean step."""
    step = float(steps["step_s"].mean()) if "step_s" in steps else 0.0
    return step > 0 and float(steps["data_s"].fillna(0.0).mean()) >= LOADER_BOUND_SHARE * step


def loader_capacity(measurements: pd.DataFrame, *, case: str, workers: int, source: str) -> pd.Series:
    """One rank's loader alone: `ddlbench loaderbench`'s row of this case at this worker (or thread) count,
    the fastest where there are several. measurements: loaderbench.json's (case, workers, img_s,
    batch_intervals_s)."""
    rows = measurements[measurements["case"] == case]
    if rows.empty:
        cases = sorted(set(measurements["case"][measurements["workers"].notna()].astype(str)))
        raise ConfigError(
            f"--loader-capacity {source}: no {case} row (it has {', '.join(cases) or 'none'}); run 'ddlbench "
            f"loaderbench ... --loaders {case}' on the machine predicted"
        )
    at = rows[rows["workers"] == workers]
    if at.empty:
        counts = ", ".join(str(int(w)) for w in sorted(rows["workers"].dropna()))
        raise ConfigError(
            f"--loader-capacity {source}: no {case} row at {workers} workers/threads, the prediction's (it has "
            f"{counts}); run 'ddlbench loaderbench ... --loaders {case} --workers {workers}' on the machine predicted"
        )
    return at.loc[at["img_s"].idxmax()]


# --- what the framework sends ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    op: str
    bytes: float
    # when it can be sent, as a share of its phase (backward, or forward where in_forward); 1.0 = at the end
    ready_fraction: float
    after_step: bool = False  # sent after the optimizer step, or before forward: overlapped with nothing
    extra_latency_s: float = 0.0  # the framework's own wait before sending (Horovod's cycle)
    in_forward: bool = False  # sent during forward (a sharded mode's parameter all-gathers)
    # the compute of its phase stops here until the message is done: a unit's parameters, gathered before the
    # unit computes (None: nothing waits for it but the step's end)
    needed_fraction: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Unit:
    """Parameters gathered and reduced together (an FSDP2 group, a ZeRO-3 bucket): their bytes as gathered
    and as reduced, and the share of backward at which the unit's backward starts and ends (its forward is the
    mirror: from 1 - end to 1 - start)."""

    gather_bytes: float
    reduce_bytes: float
    start: float
    end: float
    root: bool = False  # FSDP2 keeps the root group gathered from forward into backward


MODELLED = ("ddp", "horovod", "deepspeed", "fsdp")


def check_framework(framework: Mapping[str, Any]) -> None:
    """ConfigError unless the model covers this framework configuration."""
    name = framework["name"]
    if name not in MODELLED:
        raise ConfigError(
            f"framework={name}: predict models ddp (with or without zero_optimizer), horovod, deepspeed (ZeRO 0-3) "
            "and fsdp; DataParallel's one process driving every GPU of a node has no part in the model: measure it"
        )


def units_from_buckets(buckets: Sequence[Any], *, gather_scale: float) -> list[Unit]:
    """ZeRO-3's units: its reduce buckets in backward order, each gathering the parameters it reduces."""
    out, start = [], 0.0
    for b in buckets:
        out.append(Unit(gather_bytes=b.bytes * gather_scale, reduce_bytes=b.bytes, start=start, end=b.ready_fraction))
        start = b.ready_fraction
    return out


def units_from_groups(
    gradients: Sequence[Any], owner: Mapping[str, int], root: int, *, gather_scale: float, reduce_scale: float
) -> list[Unit]:
    """FSDP2's units from each parameter's group (owner: name -> group, root: the model's own group), in the
    order their backward ends; a unit's backward starts where the unit before it ends, or at its first
    gradient where that comes earlier (the root's parameters sit at both ends of the model)."""
    groups: dict[int, list[Any]] = {}
    for g in gradients:
        groups.setdefault(owner.get(g.name, root), []).append(g)
    out, previous_end = [], 0.0
    for index, grads in sorted(groups.items(), key=lambda item: max(g.ready_fraction for g in item[1])):
        end = max(g.ready_fraction for g in grads)
        size = sum(g.bytes for g in grads)
        start = min(previous_end, min(g.ready_fraction for g in grads))
        out.append(
            Unit(
                gather_bytes=size * gather_scale,
                reduce_bytes=size * reduce_scale,
                start=start,
                end=end,
                root=index == root,
            )
        )
        previous_end = end
    return out


def _unit_messages(units: Sequence[Unit], *, reshard: bool) -> list[Message]:
    """A sharded mode's step: each unit's parameters all-gathered before its forward (the next unit's gather
    prefetched while the unit before it computes), again before its backward where resharded after forward
    (not the root), and its gradients reduce-scattered once its backward ends."""
    out = []
    forward = sorted(units, key=lambda u: 1.0 - u.end)  # forward runs the units in the reverse of backward
    for k, u in enumerate(forward):
        issue = 1.0 - forward[k - 1].end if k else 0.0
        need = 1.0 - u.end
        out.append(
            Message(op="all_gather", bytes=u.gather_bytes, ready_fraction=issue, in_forward=True, needed_fraction=need)
        )
    backward = sorted(units, key=lambda u: u.start)
    if reshard:
        regathered = [u for u in backward if not u.root]
        for k, u in enumerate(regathered):
            issue = regathered[k - 1].start if k else 0.0
            out.append(Message(op="all_gather", bytes=u.gather_bytes, ready_fraction=issue, needed_fraction=u.start))
    out += [Message(op="reduce_scatter", bytes=u.reduce_bytes, ready_fraction=u.end) for u in backward]
    return out


def messages(
    framework: Mapping[str, Any],
    buckets: Sequence[Any],
    *,
    buffer_bytes: int = 0,
    param_bytes: float | None = None,
    units: Sequence[Unit] | None = None,
    persistent_bytes: float = 0.0,
    amp: bool = False,
) -> list[Message]:
    """The collectives of one step for a framework config, its gradient buckets (benchmarks/gradients.py),
    the bytes of the model's buffers and of its parameters (what ZeRO-1/2 and ZeroRedundancyOptimizer
    all-gather; by default the buckets' bytes, which are fewer where gradients are reduced in half precision),
    for fsdp its units (units_from_groups over the adapter's fully_shard groups), for ZeRO-3 the units of the
    parameters it partitions (one per module; without them its reduce buckets stand in) and the fp32 bytes of
    those it keeps whole (DeepSpeedConfig.zero3_persists); amp: the run computes under autocast."""
    check_framework(framework)
    name, config = framework["name"], framework_config(framework)
    total = param_bytes if param_bytes is not None else sum(b.bytes for b in buckets)
    if name == "ddp":
        grads = [Message(op="all_reduce", bytes=b.bytes, ready_fraction=b.ready_fraction) for b in buckets]
        # DDP broadcasts rank 0's buffers (BatchNorm statistics) before every forward (broadcast_buffers)
        if buffer_bytes:
            grads.append(Message(op="broadcast", bytes=buffer_bytes, ready_fraction=0.0, after_step=True))
        if config.zero_optimizer:
            # ZeroRedundancyOptimizer: each rank steps 1/W of the parameters and broadcasts them: all of them
            # reach every rank, as an all-gather's bytes do
            grads.append(Message(op="all_gather", bytes=total, ready_fraction=1.0, after_step=True))
        return grads
    if name == "horovod":
        cycle = config.cycle_time_ms * 1e-3 / 2  # on average half a cycle
        return [
            Message(op="all_reduce", bytes=b.bytes, ready_fraction=b.ready_fraction, extra_latency_s=cycle)
            for b in buckets
        ]
    if name == "deepspeed":
        stage, overlap = config.zero_stage, config.overlaps_comm()
        if stage == 0:
            return [Message(op="all_reduce", bytes=b.bytes, ready_fraction=1.0) for b in buckets]
        if stage == 3:
            # parameters gathered as the engine holds them: fp32 unless its own mixed precision holds half
            scale = 1.0 if config.fp32_weights(amp=amp) else 0.5
            if units is None:  # no module layout: the reduce buckets stand for the units
                plan = _unit_messages(units_from_buckets(buckets, gather_scale=scale), reshard=True)
            else:
                # the modules' parameters gathered before their forward and backward (units_from_groups over the
                # parameters ZeRO-3 partitions), the gradients reduce-scattered in their buckets, and the
                # parameters it keeps whole gathered once after the step
                plan = [m for m in _unit_messages(units, reshard=True) if m.op == "all_gather"]
                plan += [Message(op="reduce_scatter", bytes=b.bytes, ready_fraction=b.ready_fraction) for b in buckets]
                if persistent_bytes:
                    plan.append(
                        Message(op="all_gather", bytes=persistent_bytes * scale, ready_fraction=1.0, after_step=True)
                    )
            if overlap:
                return plan
            return [replace(m, ready_fraction=1.0) if m.op == "reduce_scatter" else m for m in plan]
        grads = [
            Message(op="reduce_scatter", bytes=b.bytes, ready_fraction=b.ready_fraction if overlap else 1.0)
            for b in buckets
        ]
        return [*grads, Message(op="all_gather", bytes=total, ready_fraction=1.0, after_step=True)]
    if name == "fsdp":
        if not units:
            raise ConfigError("framework=fsdp: predict needs the model's units (units_from_groups)")
        return _unit_messages(units, reshard=bool(config.reshard_after_forward))
    raise AssertionError(name)  # check_framework refused it


# --- one step --------------------------------------------------------------------------------------


def step(parts: Parts, plan: Sequence[Message], network: Network, world: int) -> dict[str, float]:
    """The modelled step on `world` GPUs: its phases in seconds. Every collective waits for the slowest rank,
    whose compute and data time vary independently (sync, counted as communication: a trace shows it as
    collective time). The rank waits for its loader where the loader needs longer for a batch than the rest
    of the step takes: step = max(the rest + the handover, the loader's seconds per batch); where the
    loader's intervals are measured, the data path and the wait are simulated (simulate_steps)."""
    during = [m for m in plan if not m.after_step]
    exposed_fwd, busy_fwd = _phase([m for m in during if m.in_forward], parts.fwd_s, network, world)
    exposed_bwd, busy_bwd = _phase([m for m in during if not m.in_forward], parts.bwd_s, network, world)
    exposed, busy, after = exposed_fwd + exposed_bwd, busy_fwd + busy_bwd, 0.0
    for m in plan:
        if m.after_step:
            cost = network.collective_s(m.op, m.bytes, world)
            after += cost
            busy += cost
    if parts.loader_intervals_s:
        step_s, loader_wait, sync = simulate_steps(parts, exposed + after, world)
    else:
        sync = math.hypot(parts.jitter_s, parts.data_jitter_s) * expected_max_normal(world)
        rest = parts.compute_s + parts.other_s + sync + exposed + after + parts.data_s
        loader_wait = max(0.0, parts.batch_s - rest)
        step_s = rest + loader_wait
    comm_exposed = sync + exposed + after
    return {
        "step_s": step_s,
        "data_s": parts.data_s + loader_wait,
        "loader_wait_s": loader_wait,
        "compute_s": parts.compute_s,
        "comm_s": busy,
        "comm_exposed_s": comm_exposed,
        "sync_s": sync,
        "other_s": parts.other_s,
    }


# the simulated run: its steps measured once every rank's queue has settled (drained where the loader is the
# slower, filled where it is the faster), as a run's warm-up steps do
SIMULATED_STEPS = 400


def simulate_steps(parts: Parts, comm_s: float, world: int, *, seed: int = 0) -> tuple[float, float, float]:
    """(step, loader wait, sync) in seconds, means over every rank and SIMULATED_STEPS steps (whole rounds of
    the makers) of `world` ranks that each have a loader of their own, as measured (parts.loader_intervals_s,
    loader_makers, loader_queue):

    - a rank's loader has W makers (DataLoader workers, or one DALI pipeline) that make batches in turn, each
      taking a time drawn from the measured ones (Parts.maker_batch_s). A maker starts its next batch once its
      last is done and the queue has room (at most `loader_queue` batches ahead of the one its rank takes);
      batches are handed over in order;
    - a step starts on every rank at once (the last step's collectives ended it); a rank takes its batch when it
      is there (the wait is data time), hands it over (parts.data_s), computes (normal: compute_s, jitter_s)
      and does the rest of its step (other_s);
    - then it waits for the slowest rank (sync, at the first collective) and for the step's exposed
      communication (comm_s, the same on every rank).

    The same seed gives the same figures: a prediction is reproducible."""
    rng = np.random.default_rng(seed + world)
    batch_s = parts.maker_batch_s()
    makers, queue = max(1, parts.loader_makers), max(1, parts.loader_queue)
    settle = max(100, 10 * queue)
    measured = makers * math.ceil(SIMULATED_STEPS / makers)  # whole rounds of the makers: no half a burst
    free = np.zeros((makers, world))  # when each maker finished its latest batch
    taken = np.zeros((queue, world))  # when each rank took its last `queue` batches (a slot frees then)
    there = np.zeros(world)  # when each rank's latest batch was handed over (in order)
    now = total_step = total_wait = total_sync = 0.0
    fixed = parts.data_s + parts.compute_s + parts.other_s
    for k in range(settle + measured):
        start = np.maximum(free[k % makers], taken[k % queue]) if k >= queue else free[k % makers]
        free[k % makers] = start + rng.choice(batch_s, size=world)
        there = np.maximum(there, free[k % makers])
        wait = np.maximum(0.0, there - now)
        taken[k % queue] = now + wait
        ready = now + wait + fixed + parts.jitter_s * rng.standard_normal(world)
        slowest = float(ready.max())
        end = slowest + comm_s
        if k >= settle:
            total_step += end - now
            total_wait += float(wait.mean())
            total_sync += slowest - float(ready.mean())
        now = end
    return total_step / measured, total_wait / measured, total_sync / measured


def _phase(plan: Sequence[Message], compute_s: float, network: Network, world: int) -> tuple[float, float]:
    """(exposed, busy) seconds of one phase's messages on one communication stream, each sent in ready order
    once the compute has passed its ready point (or the stream is free): the compute's stalls for messages it
    needs, plus the communication that runs past the phase's end; busy: the messages' own time."""
    free = stall = busy = 0.0
    for m in sorted(plan, key=lambda m: m.ready_fraction):
        cost = network.collective_s(m.op, m.bytes, world) + (m.extra_latency_s if world > 1 else 0.0)
        free = max(free, m.ready_fraction * compute_s + stall) + cost
        busy += cost
        if m.needed_fraction is not None:
            stall += max(0.0, free - (m.needed_fraction * compute_s + stall))
    return stall + max(0.0, free - (compute_s + stall)), busy


def nodes_of(world: int, gpus_per_node: int) -> int:
    return max(1, math.ceil(world / max(1, gpus_per_node)))


def predict(parts: Parts, plan: Sequence[Message], network: Network, gpus: Sequence[int]) -> pd.DataFrame:
    """One row per GPU count: step, throughput, weak-scaling efficiency against one GPU, and the shares."""
    one = step(parts, plan, network, 1)["step_s"]
    rows = []
    for n in gpus:
        s = step(parts, plan, network, n)
        on_node = min(n, network.gpus_per_node)
        rows.append(
            {
                "gpus": n,
                "nodes": nodes_of(n, network.gpus_per_node),
                **s,
                # the data path per node: what its loaders deliver against what its GPUs would take without
                # waiting for them
                "loader_node_img_s": on_node * parts.loader_img_s,
                "demand_node_img_s": on_node * parts.per_gpu_batch / (s["step_s"] - s["loader_wait_s"]),
                "throughput": n * parts.per_gpu_batch / s["step_s"],
                "per_gpu": parts.per_gpu_batch / s["step_s"],
                "efficiency": one / s["step_s"],
                "allreduce_pct": 100 * s["comm_exposed_s"] / s["step_s"],
                "data_pct": 100 * s["data_s"] / s["step_s"],
                "compute_pct": 100 * s["compute_s"] / s["step_s"],
                "other_pct": 100 * s["other_s"] / s["step_s"],
            }
        )
    return pd.DataFrame(rows)


# --- calibration against a reference ---------------------------------------------------------------


def calibrate_to_reference(
    parts: Parts, plan: Sequence[Message], network: Network, reference: pd.DataFrame
) -> tuple[Parts, int]:
    """Parts whose shares at the reference's smallest GPU count equal the reference's there: the data
    and other times and the jitter are solved for (the compute stays measured); the other GPU counts are
    then held out. reference: gpus, allreduce_pct, data_pct, compute_pct (one model and loader)."""
    first = reference.sort_values("gpus").iloc[0]
    n0 = int(first["gpus"])
    total = parts.compute_s / (first["compute_pct"] / 100)
    net = step(
        replace(parts, jitter_s=0.0, data_jitter_s=0.0, loader_img_s=math.inf, loader_intervals_s=()), plan, network, n0
    )["comm_exposed_s"]
    sync = max(0.0, total * first["allreduce_pct"] / 100 - net)
    data = total * first["data_pct"] / 100
    other = max(0.0, total - parts.compute_s - data - net - sync)
    tuned = replace(
        parts,
        data_s=data,
        other_s=other,
        jitter_s=sync / expected_max_normal(n0) if n0 > 1 else 0.0,
        loader_img_s=math.inf,
        data_jitter_s=0.0,
        loader_intervals_s=(),
        data_source="the reference",
        source=f"{parts.source}; data, other and jitter fitted to the study at {n0} GPUs",
    )
    return tuned, n0


def compare_reference(
    predicted: pd.DataFrame, reference: pd.DataFrame, *, calibrated_at: int | None = None
) -> pd.DataFrame:
    """Predicted vs reference shares per GPU count; `held_out` is False for the point fitted to (None: a
    prediction the reference did not feed, held out everywhere)."""
    keep = ["gpus", "allreduce_pct", "data_pct", "compute_pct"]
    out = reference[keep].merge(predicted[keep], on="gpus", suffixes=("_ref", "_pred"))
    for share in ("allreduce", "data", "compute"):
        out[f"{share}_err_pp"] = out[f"{share}_pct_pred"] - out[f"{share}_pct_ref"]
    out["held_out"] = out["gpus"] != calibrated_at
    return out.sort_values("gpus").reset_index(drop=True)


# --- validation against measured runs --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One measured run to predict: where it ran and what it measured."""

    run_id: str
    world_size: int
    num_nodes: int
    measured_throughput: float
    measured_allreduce_pct: float
    network: Network
    parts: Parts
    plan: tuple[Message, ...]
    label: str = ""


def validation_table(points: Sequence[Point]) -> pd.DataFrame:
    """Predicted vs measured throughput of every held-out run, with the signed error in percent."""
    rows = []
    for p in points:
        row = predict(p.parts, p.plan, p.network, [p.world_size]).iloc[0]
        rows.append(
            {
                "label": p.label,
                "run_id": p.run_id,
                "gpus": p.world_size,
                "nodes": p.num_nodes,
                "measured": p.measured_throughput,
                "predicted": row["throughput"],
                "error_pct": 100 * (row["throughput"] - p.measured_throughput) / p.measured_throughput,
                "allreduce_pct_measured": p.measured_allreduce_pct,
                "allreduce_pct_predicted": row["allreduce_pct"],
                "calibrated_from": p.parts.source,
            }
        )
    return pd.DataFrame(rows)


def summary_line(table: pd.DataFrame, *, goal_pct: float = 10.0) -> str:
    errors = table["error_pct"].abs()
    within = int((errors <= goal_pct).sum())
    return (
        f"{len(table)} held-out run(s): mean |error| {errors.mean():.1f}%, max {errors.max():.1f}%, "
        f"{within} of {len(table)} within {goal_pct:g}%"
    )


def run_source(path: Path) -> str:
    return path.name
