"""`ddlbench maxbatch`: the command (its probes, in this process on one GPU, else each a `ddlbench run`) and
its search, pure: the probes so far in, the next per-GPU batch to probe (or None: the search is done) out.
Each probe is a short run (tens of seconds on an H200), so the search extrapolates
from the memory the probes used instead of doubling from 1: a probe's peak allocated bytes against the
devices' free memory give the next batch to try, and the last steps bisect between the largest batch that
fit and the smallest that ran out of memory, down to `resolution`."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.errors import ConfigError
from ddlbench.run import cmd_run
from launchers.lifecycle.rundir_state import next_free_repeat
from launchers.local import free_port

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


def _gib(value) -> str:
    return "-" if value is None else f"{value / 2**30:.2f}"


def format_probes(probes: list[dict]) -> str:
    """The probes of `ddlbench maxbatch` as a table, in the order they ran."""
    rows = [("batch/GPU", "status", "peak alloc GiB", "peak reserved GiB", "img/s", "run")]
    rows += [
        (
            str(p["batch"]),
            p["status"],
            _gib(p.get("peak_allocated_bytes")),
            _gib(p.get("peak_reserved_bytes")),
            "-" if p.get("throughput_img_s") is None else f"{p['throughput_img_s']:,.1f}",
            str(p["run_dir"]),
        )
        for p in probes
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) if i < 5 else c for i, (c, w) in enumerate(zip(r, widths))) for r in rows)


@contextlib.contextmanager
def _output_to(path: Path):
    """Send this process's and its children's stdout and stderr (file descriptors 1 and 2) to `path`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)


def probe_in_this_process(overrides: list[str]) -> int:
    """One maxbatch probe as a world of one in this process, as `ddlbench run` would start its rank: the
    config checked first, system.env in the environment, a free rendezvous port."""
    from benchmarks.config import compose
    from benchmarks.validate import check_data, validate
    from launchers.lifecycle.rank import run_here

    cfg = compose(overrides)
    validate(cfg)
    check_data(cfg, world_size=1)
    os.environ.update({k: str(v) for k, v in cfg.system.env.items()})
    os.environ["MASTER_PORT"] = str(free_port())
    return run_here(cfg)


def cmd_maxbatch(args: argparse.Namespace) -> int:
    """The largest run.per_gpu_batch that fits in GPU memory: each probe a short run in a fresh run directory
    of a scratch campaign (on one GPU in this process, on several a `ddlbench run`); a probe fits when it
    completes, and fails on out of memory."""
    from benchmarks.config import compose
    from benchmarks.frameworks.configs import node_layout
    from benchmarks.rundir import run_files, summary_schema
    from benchmarks.validate import resolve_run_dir
    from ddlbench.maxbatch import Probe, device_capacity_bytes, search
    from launchers.lifecycle import rundir_state

    cfg = compose(args.overrides)
    if cfg.system.device != "cuda":
        raise ConfigError(
            f"ddlbench maxbatch searches GPU memory, but system={cfg.system.name} runs on the CPU "
            "(system.device=cpu), which has none to fill; pass a GPU system, e.g. "
            "'ddlbench maxbatch system=h200 model=resnet model.depth=50'"
        )
    if cfg.run.dir:
        raise ConfigError(
            f"run.dir={cfg.run.dir} cannot be set for maxbatch: every probe needs its own directory; drop it"
        )
    if args.start < 1 or args.limit < args.start:
        raise ConfigError(f"--start {args.start} --max {args.limit}: need 1 <= --start <= --max")
    if not 0 <= args.resolution < 1:
        raise ConfigError(f"--resolution {args.resolution}: need 0 <= --resolution < 1 (0.01: within 1%; 0: exact)")
    nproc, devices = node_layout(cfg)
    # one GPU: every probe a run in this process, an out of memory recovered from (a fresh process costs
    # ~20 s of Python, torch, CUDA and the model's build on an H200); several: each probe launches its ranks
    in_process = nproc * devices == 1 and not args.fresh_processes
    probes: list[dict] = []

    def fits(batch: int) -> Probe:
        overrides = [
            *args.overrides,
            f"run.per_gpu_batch={batch}",
            "run.warmup_steps=1",
            f"run.steps={args.steps}",
            "run.epochs=null",
            "run.log_every=0",
            "run.trace=off",
            f"run.campaign={args.campaign}",
        ]
        probe_cfg = compose(overrides)
        overrides.append(f"run.repeat={next_free_repeat(probe_cfg, world_size=nproc * devices)}")
        run_dir = resolve_run_dir(compose(overrides), world_size=nproc * devices, num_nodes=1)
        run_dir.mkdir(parents=True, exist_ok=True)
        print(f"[ddlbench] maxbatch: batch {batch} per GPU -> {run_dir}", file=sys.stderr, flush=True)
        with _output_to(run_dir / "probe.log"):  # the ranks' tracebacks stay out of the table
            if in_process:
                code = probe_in_this_process([*overrides, f"run.dir={run_dir.resolve()}"])
            else:
                code = cmd_run(argparse.Namespace(overrides=overrides, dry_run=False))
        summary = run_files.read_summary(run_dir) or {}
        probe = {
            "batch": batch,
            "run_dir": run_dir,
            **{k: summary.get(k) for k in (*summary_schema.MEMORY_FIELDS, "throughput_img_s")},
        }
        if code == 0 and rundir_state.state(run_dir) == "completed":
            probes.append({**probe, "status": "fits"})
            return Probe(batch, True, probe["peak_allocated_bytes"])
        if summary_schema.ran_out_of_memory(run_dir):
            probes.append({**probe, "status": "out of memory"})
            return Probe(batch, False)
        probes.append({**probe, "status": "failed"})
        print(format_probes(probes))
        raise ConfigError(
            f"the probe at run.per_gpu_batch={batch} failed, not for lack of memory (exit code {code}); "
            f"fix the run first: its output is in {run_dir / 'probe.log'}"
            + ("; or probe each batch in a fresh process: --fresh-processes" if in_process else "")
        )

    capacity_bytes = None if args.doubling else device_capacity_bytes()
    fit, fail = search(
        fits, start=args.start, limit=args.limit, capacity_bytes=capacity_bytes, resolution=args.resolution
    )
    print(format_probes(probes))
    if fit is None:
        print(f"\nno batch fits: run.per_gpu_batch={fail} is already out of memory ({nproc * devices} GPU(s))")
        return 1
    shown = next(p for p in probes if p["batch"] == fit)
    tail = f"; {fail} is out of memory" if fail is not None else f" (--max {args.limit}: not searched beyond)"
    if fail is not None and fail - fit > 1:
        tail += f" ({fit + 1}-{fail - 1} not probed: --resolution {args.resolution:g})"
    print(
        f"\nlargest per-GPU batch that fits: {fit}{tail}; peak allocated {_gib(shown['peak_allocated_bytes'])} GiB, "
        f"reserved {_gib(shown['peak_reserved_bytes'])} GiB (the largest over the ranks)"
    )
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench maxbatch`."""
    p = sub.add_parser(
        "maxbatch",
        help="the largest run.per_gpu_batch that fits in GPU memory (extrapolated from the probes' memory, then bisection)",
        description="Each probe is a short run (1 warm-up + --steps steps) at one run.per_gpu_batch, in a "
        "fresh run directory of the campaign --campaign (its output in probe.log there): on one GPU a run in this "
        "process, on several a 'ddlbench run' of its own. A probe fits "
        "when it completes; one that runs out of GPU memory bounds the search; any other failure "
        "stops it. The next batch is extrapolated from the peak memory of the probes that fit against the "
        "GPUs' free memory (nvidia-smi), then bisected down to --resolution. GPU systems only: a CPU run "
        "has no GPU memory to fill.",
        epilog="example:\n  ddlbench maxbatch system=h200 framework=fsdp precision=amp_bf16 model=resnet model.depth=50",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides of the run, as for 'ddlbench run'")
    p.add_argument("--start", type=int, default=1, help="first batch per GPU to probe (default 1)")
    p.add_argument(
        "--max", dest="limit", type=int, default=65536, help="largest batch per GPU to probe (default 65536)"
    )
    p.add_argument("--steps", type=int, default=2, help="measured steps per probe, after 1 warm-up step (default 2)")
    p.add_argument(
        "--resolution",
        type=float,
        default=0.01,
        help="stop when the batches not probed between the largest fit and the smallest out of memory are "
        "at most this share of the fit (default 0.01; 0: exact to 1)",
    )
    p.add_argument(
        "--doubling",
        action="store_true",
        help="no extrapolation: --start, doubling until out of memory, then bisection (with --resolution 0: the search before 2026-12-03)",
    )
    p.add_argument(
        "--fresh-processes",
        action="store_true",
        help="each probe a fresh 'ddlbench run' (as with several GPUs, where it always is); by default a "
        "one-GPU search probes in this process, recovering from each out of memory",
    )
    p.add_argument("--campaign", default="maxbatch", help="run.campaign of the probes' scratch run directories")
    p.set_defaults(func=cmd_maxbatch)
