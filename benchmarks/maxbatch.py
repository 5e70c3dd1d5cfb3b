"""The largest per-GPU batch that fits (`ddlbench maxbatch`'s search), pure: the probes so far in, the next
per-GPU batch to probe (or None: the search is done) out. Each probe is a short run (tens of seconds on an
H200), so the search extrapolates from the memory the probes used instead of doubling from 1: a probe's peak
allocated bytes against the devices' free memory give the next batch to try, and the last steps bisect between
the largest batch that fit and the smallest that ran out of memory, down to `resolution`."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

# The planning capacity is the devices' free memory less this share: what the CUDA context, NCCL's
# buffers and the caching allocator's fragmentation take (docs/results/2026-12-03-h200-maxbatch.md).
HEADROOM = 0.02

# A single probe bounds the per-sample bytes from above (peak / batch), so capacity / that is at most the
# answer (when peak / batch falls with the batch); the second probe goes there, far from the first.
FIRST_JUMP = 1.0


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe's outcome: its per-GPU batch, whether it fit, and its peak allocated bytes (largest over
    the ranks; None where unknown)."""

    batch: int
    fits: bool
    peak_allocated_bytes: int | None = None


def tolerance(fit: int, resolution: float) -> int:
    """The bracket width (smallest out of memory - largest fit) at which the search stops: the batches
    not probed between them (width - 1) are at most resolution x the largest fit (resolution 0: exact)."""
    return 1 + int(fit * resolution)


def bracket(probes: Sequence[Probe]) -> tuple[int | None, int | None]:
    """(largest batch that fit, smallest that ran out of memory; None where none did)."""
    fits = [p.batch for p in probes if p.fits]
    fails = [p.batch for p in probes if not p.fits]
    return max(fits, default=None), min(fails, default=None)


def _line(probes: Sequence[Probe]) -> tuple[float, float] | None:
    """(bytes per sample, fixed bytes) through the two largest fits with a peak; None with fewer, or a
    slope that does not grow."""
    known = sorted((p.batch, p.peak_allocated_bytes) for p in probes if p.fits and p.peak_allocated_bytes)
    if len(known) < 2:
        return None
    (b1, m1), (b2, m2) = known[-2:]
    slope = (m2 - m1) / (b2 - b1)
    return (slope, m2 - slope * b2) if slope > 0 else None


def next_batch(
    probes: Sequence[Probe], *, start: int, limit: int, capacity_bytes: int | None = None, resolution: float = 0.0
) -> int | None:
    """The next batch to probe, or None when done. Without a capacity this is the doubling search (start,
    2 x start, ... up to limit, then bisection). With one: the second probe jumps to FIRST_JUMP of the
    first probe's proportional bound; from two fits on, the line through the two largest predicts the
    batch that fills the capacity less HEADROOM (expected to fit, just under the answer); past it the
    search steps up by the tolerance, doubling the step while probes fit; after an out of memory it
    aims at the line's batch HEADROOM under that probe's predicted memory while that lies inside the
    bracket, else bisects. It stops when the bracket is within tolerance(fit, resolution), at limit, or
    when start itself runs out of memory."""
    if not probes:
        return start
    fit, fail = bracket(probes)
    if fit is None or fit >= limit:
        return None
    tol = tolerance(fit, resolution)
    if fail is not None and fail - fit <= tol:
        return None
    line = _line(probes) if capacity_bytes else None
    if line is not None:
        slope, fixed = line
        usable = capacity_bytes * (1 - HEADROOM)
        # at the planned edge: step up by the tolerance, doubling the step with each fit already past it
        near = sum(1 for p in probes if p.fits and (p.peak_allocated_bytes or 0) >= usable - slope * tol)
        edge = fit + tol * 2 ** max(0, near - 1)
    if fail is not None:
        middle = (fit + fail) // 2
        if line is None:
            return middle
        if fail > 4 * fit:  # the line came from probes far below: their peaks may be the optimizer's
            return max(fit + 1, int((fit * fail) ** 0.5))  # (BERT-large's at batch 1-10), not the activations'
        aim = int((min(usable, (fixed + slope * fail) * (1 - HEADROOM)) - fixed) / slope)
        if fit < aim < fail:
            return aim
        return min(edge, middle) if near else middle  # past the planned edge: a step, else bisection
    target = 2 * fit
    if capacity_bytes and line is None:  # one probe: its peak / batch bounds the bytes per sample from above
        peak = next(p.peak_allocated_bytes for p in probes if p.batch == fit)
        if peak:
            target = max(target, int(FIRST_JUMP * fit * capacity_bytes * (1 - HEADROOM) / peak))
    elif line is not None:
        planned = int((usable - fixed) / slope)
        target = planned if planned >= fit + tol else edge
    return min(max(target, fit + 1), limit)


def search(fits, *, start: int, limit: int, capacity_bytes: int | None = None, resolution: float = 0.0):
    """Drive next_batch with fits(batch) -> Probe (one probe each; no batch is asked twice); returns
    (largest fit, smallest out of memory) as bracket() does."""
    probes: list[Probe] = []
    while (
        batch := next_batch(probes, start=start, limit=limit, capacity_bytes=capacity_bytes, resolution=resolution)
    ) is not None:
        assert all(p.batch != batch for p in probes), (batch, probes)
        probes.append(fits(batch))
    return bracket(probes)


def device_capacity_bytes() -> int | None:
    """The smallest free memory of this machine's GPUs before the probes start (nvidia-smi, which makes no
    CUDA context that would take memory from the probes); None without nvidia-smi or GPUs."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        sizes_mib = [int(line) for line in out.split() if line.strip().isdigit()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return min(sizes_mib) * 2**20 if sizes_mib else None


def gib(value) -> str:
    return "-" if value is None else f"{value / 2**30:.2f}"


def format_probes(probes: list[dict]) -> str:
    """The probes of `ddlbench maxbatch` as a table, in the order they ran."""
    rows = [("batch/GPU", "status", "peak alloc GiB", "peak reserved GiB", "img/s", "run")]
    rows += [
        (
            str(p["batch"]),
            p["status"],
            gib(p.get("peak_allocated_bytes")),
            gib(p.get("peak_reserved_bytes")),
            "-" if p.get("throughput_img_s") is None else f"{p['throughput_img_s']:,.1f}",
            str(p["run_dir"]),
        )
        for p in probes
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i < 5 else c for i, (c, w) in enumerate(zip(r, widths))) for r in rows)
