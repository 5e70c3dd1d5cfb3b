"""`ddlbench maxbatch`: the command: its probes, in this process on one GPU, else each a `ddlbench run`; the
search that chooses them is benchmarks/maxbatch.py."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from benchmarks.errors import ConfigError
from benchmarks.maxbatch import format_probes, gib
from ddlbench.run import cmd_run
from launchers.lifecycle.rundir_state import next_free_repeat
from launchers.local import free_port


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
    from benchmarks.maxbatch import Probe, device_capacity_bytes, search
    from benchmarks.rundir import run_files, summary_schema
    from benchmarks.validate import resolve_run_dir
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
        f"\nlargest per-GPU batch that fits: {fit}{tail}; peak allocated {gib(shown['peak_allocated_bytes'])} GiB, "
        f"reserved {gib(shown['peak_reserved_bytes'])} GiB (the largest over the ranks)"
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
