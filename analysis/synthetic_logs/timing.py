"""The timing model: per rank x step phase times of a synthetic run.

Coarse but with the seed studies' shape: compute per model depth, ring-allreduce time that grows with GPU
count and jumps when it leaves the node, partly overlapped with backward (DDP > Horovod > DeepSpeed);
native loading on CPUs is slower than DALI; lognormal jitter per rank and occasional straggler steps, so
the slowest rank matters. A cell with `slow_host` has a slow node: its ranks compute slow_factor x slower
and the others wait for them every step (synchronous training).
"""

from __future__ import annotations

import math

import numpy as np

from analysis.synthetic_logs.cells import SynthCell

# seconds per image of fwd / bwd / opt on one A100-class GPU (fp32-ish), and gradient size in bytes
MODELS = {
    "resnet50": (0.00070, 0.00140, 0.00010, 102e6),
    "resnet101": (0.00125, 0.00250, 0.00018, 178e6),
    "resnet152": (0.00180, 0.00360, 0.00025, 241e6),
}
# fraction of the allreduce hidden behind backward
OVERLAP = {"ddp": 0.75, "horovod": 0.6, "deepspeed": 0.4}
# host time per image to decode+augment, split over the workers of one GPU
PREP_S_PER_IMAGE = {"native": 0.0080 / 8, "dali": 0.0025 / 8, "synthetic": 0.0}


def phase_times(cell: SynthCell, steps: int, rng: np.random.Generator, gpus_per_node: int = 4) -> dict[str, np.ndarray]:
    """Per rank x step phase times (arrays of shape world_size x steps)."""
    fwd1, bwd1, opt1, grad_bytes = MODELS[cell.model]
    n, b = cell.world_size, cell.per_gpu_batch
    shape = (n, steps)
    jitter = rng.lognormal(0.0, 0.03, size=shape)
    fwd = fwd1 * b * jitter
    bwd = bwd1 * b * jitter * rng.lognormal(0.0, 0.01, size=shape)
    opt = np.full(shape, opt1 * b) * rng.lognormal(0.0, 0.02, size=shape)
    if n > 1:
        # ring allreduce: 2(N-1)/N of the gradient over the slowest link, plus per-hop latency
        bw = 80e9 if cell.num_nodes == 1 else 6e9 / (1 + 0.15 * math.log2(cell.num_nodes))
        comm1 = 2 * (n - 1) / n * grad_bytes / bw + 2 * (n - 1) * 60e-6 + 0.004 * math.log2(n)
        comm = comm1 * rng.lognormal(0.0, 0.08, size=shape)
        exposed = comm * (1 - OVERLAP.get(cell.framework, 0.5))
        bwd = bwd + comm - exposed  # the overlapped part runs during backward
    else:
        comm = exposed = np.zeros(shape)
    prep = PREP_S_PER_IMAGE[cell.loader] * b * (3.0 if cell.cache == "cold" else 1.0)
    # the loader prefetches during compute: only what it cannot hide blocks the host
    hidden = 0.1 * (fwd + bwd)
    data = np.maximum(prep * rng.lognormal(0.0, 0.15, size=shape) - hidden, 0) + 2e-4 * jitter
    # a shared file system slows native loading as more nodes read from it
    data = data * (1 + 0.05 * math.log2(cell.num_nodes)) if cell.loader == "native" else data
    other = np.full(shape, 0.0015) * jitter
    step = data + fwd + bwd + opt + exposed + other
    # stragglers: a random rank is slow on ~1% of steps
    slow = rng.random(steps) < 0.01
    if slow.any():
        step[rng.integers(0, n, size=slow.sum()), np.flatnonzero(slow)] *= 1.5
    if cell.slow_host is not None:  # no draws of its own: the other cells' numbers stay as they were
        fwd, bwd, opt, comm, exposed, step = _slow_host(
            cell, gpus_per_node, fwd=fwd, bwd=bwd, opt=opt, comm=comm, exposed=exposed, step=step
        )
    return {
        "data_s": data,
        "fwd_s": fwd,
        "bwd_s": bwd,
        "opt_s": opt,
        "comm_s": comm,
        "comm_exposed_s": exposed,
        "step_s": step,
    }


def _slow_host(cell: SynthCell, gpus_per_node: int, **phases: np.ndarray) -> tuple[np.ndarray, ...]:
    """The phases with host cell.slow_host's ranks computing (fwd, bwd, opt) cell.slow_factor x slower, and
    every step synchronous: each rank ends it with the slowest, the others waiting in backward's all-reduce
    (the wait is inside bwd_s, as a rank log's backward holds its exposed collective, and in comm_s and
    comm_exposed_s)."""
    slow = (np.arange(cell.world_size) // gpus_per_node == cell.slow_host)[:, None]
    factor = np.where(slow, cell.slow_factor, 1.0)
    fwd, bwd, opt = (phases[k] * factor for k in ("fwd", "bwd", "opt"))
    step = phases["step"] + (fwd + bwd + opt) - (phases["fwd"] + phases["bwd"] + phases["opt"])
    wait = step.max(axis=0, keepdims=True) - step
    return fwd, bwd + wait, opt, phases["comm"] + wait, phases["exposed"] + wait, step + wait
