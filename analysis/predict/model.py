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
other. Everything in this package is arithmetic on plain numbers and DataFrames; building the model for
its gradient layout (torch) happens in benchmarks/gradients.py. This module holds one rank's Parts and
the messages; the network is network.py, the step and its simulation simulation.py.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import framework_config


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
    # the measured steps the means are of (per rank): the calibration's own uncertainty (Parts.relative_error)
    num_steps: int = 0

    def relative_error(self) -> float:
        """The calibration's relative standard error of its mean compute step: jitter over sqrt(steps); 0 where
        the step count is unknown (a fitted or scaled Parts keeps it)."""
        compute_s = self.fwd_s + self.bwd_s + self.opt_s + self.other_s + self.data_s
        if self.num_steps < 1 or compute_s <= 0:
            return 0.0
        return self.jitter_s / compute_s / math.sqrt(self.num_steps)

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

    def with_compute(self, other: Parts) -> Parts:
        """The compute (fwd, bwd, opt, other and the jitter) of another run, measured where the prediction is for
        (--compute-from); the data path stays this run's."""
        return replace(
            self,
            fwd_s=other.fwd_s,
            bwd_s=other.bwd_s,
            opt_s=other.opt_s,
            other_s=other.other_s,
            jitter_s=other.jitter_s,
            source=f"{self.source}, compute from {other.source}",
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
