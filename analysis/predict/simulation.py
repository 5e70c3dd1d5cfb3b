"""The simulation of `ddlbench predict`: one step on n GPUs from Parts, the messages and the network
(closed form, or every rank's loader simulated), the table per GPU count, the fit to a study's row and the
validation against held-out runs. The model's terms: model.py's docstring."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analysis.predict.model import Message, Parts, expected_max_normal
from analysis.predict.network import Network

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
