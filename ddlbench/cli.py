"""The `ddlbench` command: run, data, results, doctor, demo, campaign."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
from pathlib import Path

from benchmarks.errors import ConfigError

EPILOG = """examples:
  ddlbench data synth --out data/synth --classes 10 --per-class 64
  ddlbench run loader=native data.path=data/synth model=resnet model.depth=18 run.per_gpu_batch=16
  ddlbench run framework=ddp system=h200 precision=amp_bf16 model.depth=50 run.per_gpu_batch=256
  ddlbench maxbatch framework=fsdp system=h200 precision=amp_bf16 model.depth=50
  ddlbench results runs/
  ddlbench predict model=resnet model.depth=50 run.per_gpu_batch=64 --from runs/one --system juwels_booster
overrides are Hydra's: see 'python -m benchmarks --help' for groups and 'ddlbench run --cfg job' for keys"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def next_free_repeat(cfg, *, world_size: int) -> int:
    """The first run.repeat (from the configured one) whose run directory holds no run."""
    from benchmarks import rundir
    from benchmarks.validate import settings

    flat = rundir.flatten(settings(cfg))
    flat["run.dir"] = None
    while rundir.holds_a_run(rundir.run_dir(flat, world_size=world_size, num_nodes=1)):
        flat["run.repeat"] += 1
    return flat["run.repeat"]


def split_sweep(value: str) -> list[str]:
    """A sweep value's choices: split at the commas outside brackets ("8,16" -> 8, 16; "[1,2],[4]" -> [1,2], [4])."""
    parts, depth, current = [], 0, ""
    for char in value:
        depth += {"[": 1, "]": -1, "(": 1, ")": -1, "{": 1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def sweep(overrides: list[str]) -> list[list[str]]:
    """Every combination of the overrides' comma-separated choices (Hydra's sweep syntax), in order."""
    import itertools

    choices = []
    for override in overrides:
        key, sep, value = override.partition("=")
        choices.append([f"{key}{sep}{v}" for v in split_sweep(value)] if sep else [override])
    return [list(combo) for combo in itertools.product(*choices)]


def cmd_run_multirun(args: argparse.Namespace) -> int:
    """ddlbench run -m: every combination, each validated before the first starts, then one after the other,
    one run directory each; a summary line per run at the end."""
    combos = sweep(args.overrides)
    if any(o.startswith("run.dir=") for o in args.overrides):
        raise ConfigError("run.dir cannot be set with -m: every combination needs its own run directory; drop it")
    quiet = not (args.dry_run or getattr(args, "cfg", None))
    for combo in combos:  # bad input in any combination stops before anything runs; a dry run prints each
        code = cmd_run(
            argparse.Namespace(
                overrides=combo,
                dry_run=True,
                quiet=quiet,
                cfg=getattr(args, "cfg", None),
                resolve=getattr(args, "resolve", False),
            )
        )
        if code:
            return code
    if args.dry_run or getattr(args, "cfg", None):
        print(f"[ddlbench] multirun: {len(combos)} run(s) valid", file=sys.stderr)
        return 0
    results = []
    for k, combo in enumerate(combos, 1):
        varying = [o for o, original in zip(combo, args.overrides) if o != original or "," in original]
        print(
            f"[ddlbench] multirun {k}/{len(combos)}: {' '.join(varying) or '(the base)'}", file=sys.stderr, flush=True
        )
        code = cmd_run(argparse.Namespace(overrides=combo, dry_run=False))
        results.append((" ".join(varying), code))
        if code == 130:
            break  # interrupted: the rest does not start
    failed = [r for r in results if r[1]]
    print(
        f"[ddlbench] multirun: {len(results) - len(failed)} of {len(combos)} run(s) completed"
        + "".join(f"\n  exit {code}: {what}" for what, code in failed),
        file=sys.stderr,
    )
    return 130 if results and results[-1][1] == 130 else (1 if failed else 0)


def cmd_run(args: argparse.Namespace) -> int:
    """Validate everything, then start system.ranks_per_node local ranks with the framework's launcher (one
    process for a single-process framework, DataParallel, which drives them as GPUs: FrameworkConfig.local_layout)."""
    from benchmarks import affinity, launch, rundir
    from benchmarks.config import compose
    from benchmarks.frameworks.configs import node_layout
    from benchmarks.freshstart import import_what_ranks_import_late
    from benchmarks.launch.base import LOCAL
    from benchmarks.rundir import holds_a_run
    from benchmarks.validate import check_data, validate, warnings
    from launchers.local import local_command, ranks_may_fork
    from launchers.supervise import INTERRUPTED_EXIT, announce, run_launcher

    if getattr(args, "multirun", False):
        return cmd_run_multirun(args)
    ambiguous = [o for o in args.overrides if "=" in o and len(split_sweep(o.partition("=")[2])) > 1]
    env = [o for o in ambiguous if o.lstrip("+").startswith("system.env.")]
    if env:
        name, _, value = env[0].lstrip("+").removeprefix("system.env.").partition("=")
        raise ConfigError(
            f"override {env[0]!r}: Hydra reads a comma as a list of choices, so system.env cannot carry {value!r}; "
            f"export {name}={value} before ddlbench run (the ranks inherit it)"
        )
    if ambiguous:
        raise ConfigError(
            f"override {ambiguous[0]!r} lists several values; pass -m to run each combination "
            "(ddlbench run -m ...), or one value"
        )
    cfg = compose(args.overrides)
    if getattr(args, "cfg", None):
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(cfg, resolve=args.resolve), end="")
        return 0
    validate(cfg)
    for warning in warnings(cfg):
        print(f"[ddlbench] warning: {warning}", file=sys.stderr, flush=True)
    affinity.check_local(cfg.system.cpu_bind)
    # torch and the adapters only for a config that passed the checks above: a typo answers at once
    from benchmarks import components
    from benchmarks.validate import resolve_run_dir

    # constructing the adapters imports their libraries: a missing horovod, deepspeed, DALI (or transformers,
    # for the model's task) is a one-line error here, not a traceback from inside the launcher
    framework = components.build_framework(cfg)
    components.build_loader(cfg)
    components.build_task(cfg)
    nproc, devices_per_process = node_layout(cfg)
    world_size = nproc * devices_per_process  # the GPUs (or CPU ranks) trained on: g<W> of the run directory
    check_data(cfg, world_size=world_size)
    run_dir = resolve_run_dir(cfg, world_size=world_size, num_nodes=1)
    retry = None
    if holds_a_run(run_dir):
        state = rundir.state(run_dir)
        if state not in ("failed", "interrupted"):
            held = "an incomplete" if state == "incomplete" else f"a {state}"
            raise ConfigError(
                f"run directory {run_dir} already holds {held} run (never overwritten); pass "
                f"run.repeat={next_free_repeat(cfg, world_size=world_size)} or another run.campaign"
            )
        retry = state  # moved aside below, once the run really starts (not for a dry run)
    fork_ranks = ranks_may_fork(cfg)
    argv = local_command(
        launcher=cfg.framework.local_launcher,
        nproc=nproc,
        master_port=_free_port(),
        overrides=[*args.overrides, f"run.dir={run_dir.resolve()}"],
        fork_ranks=fork_ranks,
    )
    env = {**os.environ, **{k: str(v) for k, v in cfg.system.env.items()}}
    if not getattr(args, "quiet", False):
        announce(argv, dry_run=args.dry_run)
    if args.dry_run:
        return 0
    if retry is not None:
        # a failed or interrupted run is kept for the post-mortem, out of the cell's place: the retry runs
        moved = rundir.move_aside(run_dir, run_dir.parent / rundir.ATTIC)
        print(f"[ddlbench] {run_dir.name} was {retry}: moved to {moved}", file=sys.stderr, flush=True)
    if fork_ranks:
        import_what_ranks_import_late(type(framework))
    code = run_launcher(argv, env=env, run_dir=run_dir, fork=launch.get(cfg.framework.local_launcher, LOCAL).forks)
    if code not in (0, INTERRUPTED_EXIT):
        print(f"ddlbench: error: the run failed with exit code {code}; its logs are in {run_dir}", file=sys.stderr)
    return code


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


def _probe_in_this_process(overrides: list[str]) -> int:
    """One maxbatch probe as a world of one in this process, as `ddlbench run` would start its rank: the
    config checked first, system.env in the environment, a free rendezvous port."""
    from benchmarks.app import run_here
    from benchmarks.config import compose
    from benchmarks.validate import check_data, validate

    cfg = compose(overrides)
    validate(cfg)
    check_data(cfg, world_size=1)
    os.environ.update({k: str(v) for k, v in cfg.system.env.items()})
    os.environ["MASTER_PORT"] = str(_free_port())
    return run_here(cfg)


def cmd_maxbatch(args: argparse.Namespace) -> int:
    """The largest run.per_gpu_batch that fits in GPU memory: each probe a short run in a fresh run directory
    of a scratch campaign (on one GPU in this process, on several a `ddlbench run`); a probe fits when it
    completes, and fails on out of memory."""
    from benchmarks import rundir
    from benchmarks.config import compose
    from benchmarks.frameworks.configs import node_layout
    from benchmarks.validate import resolve_run_dir
    from ddlbench.maxbatch import Probe, device_capacity_bytes, search

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
                code = _probe_in_this_process([*overrides, f"run.dir={run_dir.resolve()}"])
            else:
                code = cmd_run(argparse.Namespace(overrides=overrides, dry_run=False))
        summary = rundir.read_summary(run_dir) or {}
        probe = {
            "batch": batch,
            "run_dir": run_dir,
            **{k: summary.get(k) for k in (*rundir.MEMORY_FIELDS, "throughput_img_s")},
        }
        if code == 0 and rundir.state(run_dir) == "completed":
            probes.append({**probe, "status": "fits"})
            return Probe(batch, True, probe["peak_allocated_bytes"])
        if rundir.ran_out_of_memory(run_dir):
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


def cmd_loaderbench(args: argparse.Namespace) -> int:
    """Loaders alone on this machine's device (benchmarks/loaderbench.py), a table, and with --out the
    figures' JSON and PNG."""
    import json

    from benchmarks import loaderbench
    from benchmarks.config import compose

    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty (results are never overwritten); pass a new folder")
    base = compose(args.overrides)
    if not base.data.path:
        raise ConfigError(
            "loaderbench reads data: pass data.path=DIR (an ImageFolder of JPEGs; "
            "'ddlbench data synth --out DIR' makes one)"
        )
    from benchmarks.validate import check_data

    check_data(compose([*args.overrides, "loader=native"]), world_size=1)  # there, readable, a batch's worth
    cases = [c.strip() for c in args.loaders.split(",") if c.strip()]
    for case in cases:
        loaderbench.loader_overrides(case, 1, tfrecord_path=args.tfrecord)  # an unknown case: one line, now
    try:
        workers = (
            [int(w) for w in args.workers.split(",")]
            if args.workers
            else loaderbench.worker_counts(int(base.system.cpus_per_rank))
        )
    except ValueError:
        raise ConfigError(f"--workers {args.workers!r} must be comma-separated counts, e.g. --workers 1,4,15") from None
    if min(workers) < 1:
        raise ConfigError(f"--workers {args.workers}: every count must be >= 1")
    os.environ.update({k: str(v) for k, v in base.system.env.items()})  # before CUDA starts (DALI's queues)
    print(
        f"[ddlbench] loaderbench: {', '.join(cases)} at {', '.join(map(str, workers))} workers/threads, "
        f"{args.batches} batches of {base.run.per_gpu_batch} after {args.warmup}, on {base.system.device}",
        file=sys.stderr,
        flush=True,
    )
    measurements = loaderbench.measure(
        lambda extra: compose([*args.overrides, *extra]),
        base,
        cases=cases,
        workers=workers,
        warmup=args.warmup,
        batches=args.batches,
        tfrecord_path=args.tfrecord,
        progress=loaderbench.print_progress,
    )
    print(loaderbench.format_table(measurements, cpus_per_rank=int(base.system.cpus_per_rank)))
    if out is not None:
        import pandas as pd

        from analysis.loaderbench import loaderbench_curves

        out.mkdir(parents=True, exist_ok=True)
        records = [m.record() for m in measurements]
        (out / "loaderbench.json").write_text(
            json.dumps({"overrides": args.overrides, "measurements": records}, indent=1)
        )
        figure = loaderbench_curves(pd.DataFrame(records))
        figure.savefig(out / "loaderbench.png")
        print(f"\n[ddlbench] wrote loaderbench.json and loaderbench.png to {out}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from analysis.campaign_analysis import CampaignAnalysis
    from analysis.cli import one_line_warnings, runs_folder
    from analysis.results import export_tables, format_results, results_table

    one_line_warnings()

    root = runs_folder(args.runs_dir, usage="ddlbench results DIR")
    mode = getattr(args, "scaling", "weak")
    analysis = CampaignAnalysis(root)
    long = getattr(args, "long", False)
    print(format_results(*results_table(root, mode=mode, analysis=analysis), mode=mode, long=long))
    for fmt in ("csv", "parquet"):
        if getattr(args, fmt, None):
            written = export_tables(analysis, Path(getattr(args, fmt)), fmt=fmt)
            print(f"\n[ddlbench] wrote {', '.join(p.name for p in written)} to {getattr(args, fmt)}")
    return 0


def _new_folder(out: str, *, example: str) -> None:
    """--out must name a folder to write; an existing file is a one-line error, not a traceback."""
    if Path(out).exists() and not Path(out).is_dir():
        raise ConfigError(f"--out {out} is a file; pass a new folder to write to, e.g. --out {example}")


def cmd_data_synth(args: argparse.Namespace) -> int:
    _new_folder(args.out, example="data/synth")
    if args.format == "tfrecord" and args.first_index:
        raise ConfigError(
            f"--first-index {args.first_index} is for ImageFolders; write the held-out folder as JPEGs "
            "and convert it (ddlbench data convert)"
        )
    if args.format == "tfrecord":
        from benchmarks.data.tfrecord import synth_tfrecords

        total = synth_tfrecords(
            Path(args.out),
            num_classes=args.classes,
            images_per_class=args.per_class,
            width=args.width,
            height=args.height,
            quality=args.quality,
            seed=args.seed,
            num_shards=args.shards,
            progress=not args.quiet,
        )
        print(
            f"[ddlbench] wrote {total} JPEG records in {args.classes} classes to {args.shards} TFRecord shards "
            f"(+ DALI index files) in {args.out}"
        )
        return 0
    from benchmarks.data.synth import synth_imagefolder

    total = synth_imagefolder(
        Path(args.out),
        num_classes=args.classes,
        images_per_class=args.per_class,
        width=args.width,
        height=args.height,
        quality=args.quality,
        seed=args.seed,
        progress=not args.quiet,
        first_index=args.first_index,
    )
    print(f"[ddlbench] wrote {total} JPEGs in {args.classes} classes to {args.out}")
    return 0


def cmd_data_convert(args: argparse.Namespace) -> int:
    _new_folder(args.out, example="data/tfrecord")
    from benchmarks.data.tfrecord import convert_imagefolder

    total = convert_imagefolder(
        Path(args.source), Path(args.out), num_shards=args.shards, seed=args.seed, progress=not args.quiet
    )
    print(
        f"[ddlbench] wrote {total} JPEG records from {args.source} to {args.shards} TFRecord shards "
        f"(+ DALI index files) in {args.out}"
    )
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Every check, or with overrides only what that run needs; exit 1 when something is missing."""
    from benchmarks.doctor import format_checks, gpu_check, needed_by, run_checks

    if args.overrides:
        from benchmarks.config import compose

        cfg = compose(args.overrides)
        checks = run_checks(needed_by(cfg))
        if cfg.system.device == "cuda":
            checks.append(gpu_check(cfg))
    else:
        checks = run_checks()
    print(format_checks(checks))
    missing = [c.name for c in checks if not c.ok]
    if missing:  # a script (or CI) can tell a machine that lacks parts
        print(f"ddlbench: {len(missing)} missing: {', '.join(missing)}; the fix is on each line", file=sys.stderr)
    return 1 if missing else 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Synthetic JPEGs -> CPU DDP runs (native loader on 1 and 2 ranks, synthetic on 2) -> results table."""
    from benchmarks.config import compose
    from benchmarks.data.synth import synth_imagefolder

    data = Path(args.data)
    if not (data.is_dir() and any(data.iterdir())):
        synth_imagefolder(data, num_classes=10, images_per_class=48, width=160, height=120, quality=90, seed=0)
    common = ["experiment=smoke", f"data.path={data}", f"run.root={args.runs}", "run.campaign=demo"]
    for loader, ranks in (("native", 1), ("native", 2), ("synthetic", 2)):
        overrides = [*common, f"loader={loader}", f"system.ranks_per_node={ranks}"]
        repeat = next_free_repeat(compose(overrides), world_size=ranks)  # a second demo adds repeats
        code = cmd_run(argparse.Namespace(overrides=[*overrides, f"run.repeat={repeat}"], dry_run=False))
        if code:
            return code
    print()
    return cmd_results(argparse.Namespace(runs_dir=str(Path(args.runs) / "demo")))


def package_version() -> str:
    """This package's version from its installed metadata (pyproject's version); a source tree on
    PYTHONPATH, not installed, has none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ddlbench")
    except PackageNotFoundError:
        return "(not installed: no package metadata; pip install -e .)"


class _VersionAction(argparse.Action):
    """--version: `ddlbench <version>` on stdout; the metadata is read only when asked (it costs an import)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ddlbench {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddlbench",
        description="Distributed deep-learning training benchmark: frameworks x loaders x GPUs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print ddlbench's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("run", help="run one benchmark on this machine (system.ranks_per_node local ranks)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. framework=ddp loader=native model.depth=50")
    p.add_argument("--dry-run", action="store_true", help="validate and print the launch command only")
    p.add_argument(
        "-m",
        "--multirun",
        action="store_true",
        help="run every combination of comma-separated values (a=1,2 b=x,y: 4 runs), one run directory each; "
        "all are validated before the first starts",
    )
    p.add_argument(
        "--cfg", choices=("job",), default=None, help="print the composed config and exit (as Hydra's --cfg job)"
    )
    p.add_argument("--resolve", action="store_true", help="with --cfg: fill in interpolations")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("data", help="make datasets")
    data_sub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    s = data_sub.add_parser("synth", help="write a synthetic, learnable JPEG ImageFolder")
    s.add_argument("--out", required=True, help="new folder to write (refused if not empty)")
    s.add_argument("--classes", type=int, default=10)
    s.add_argument("--per-class", type=int, default=100, help="images per class")
    s.add_argument("--width", type=int, default=160)
    s.add_argument("--height", type=int, default=120)
    s.add_argument("--quality", type=int, default=90, help="JPEG quality 1-100")
    s.add_argument("--seed", type=int, default=0, help="the classes' look and the images (default 0)")
    s.add_argument(
        "--first-index",
        type=int,
        default=0,
        help="number the images from here: a held-out folder of the same classes (same --seed) starts past "
        "the training folder's --per-class",
    )
    s.add_argument(
        "--format",
        choices=("jpeg", "tfrecord"),
        default="jpeg",
        help="jpeg: an ImageFolder; tfrecord: tf.train.Example shards + DALI index files",
    )
    s.add_argument("--shards", type=int, default=4, help="TFRecord shards (--format tfrecord)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_data_synth)
    c = data_sub.add_parser("convert", help="an ImageFolder of JPEGs -> TFRecord shards + DALI index files")
    c.add_argument(
        "--from", dest="source", required=True, metavar="IMAGEFOLDER", help="ImageFolder root (<class>/<image>.jpg)"
    )
    c.add_argument("--out", required=True, help="new folder to write (refused if not empty)")
    c.add_argument("--shards", type=int, default=4, help="number of TFRecord files")
    c.add_argument("--seed", type=int, default=0, help="seed of the record order (records are shuffled across shards)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=cmd_data_convert)

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

    p = sub.add_parser(
        "loaderbench",
        help="loaders alone: img/s per loader at 1 .. the rank's CPUs of workers, and decode ceilings",
        description="Each case is the loader exactly as a run builds it (the composed config with loader=NAME and "
        "its workers/threads set), timed on this machine's device (system.device) between two "
        "synchronisations after warm-up batches; no model runs. Then the ceilings: one CPU worker's "
        "decode + crop rate and the device's batched decode_jpeg.",
        epilog="example:\n  ddlbench loaderbench system=h200 data.path=data/jpeg run.per_gpu_batch=256 --out loaderbench/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "overrides", nargs="*", help="Hydra overrides (system, data.path, run.per_gpu_batch, model.image_size)"
    )
    p.add_argument(
        "--loaders",
        default="native,native_gpu,dali",
        help="comma-separated cases: native, native_gpu, dali, dali-tfrecord (default native,native_gpu,dali)",
    )
    p.add_argument(
        "--workers",
        default=None,
        help="comma-separated worker/thread counts (default 1, 2, 4, ... up to the rank's CPUs less one)",
    )
    p.add_argument("--warmup", type=int, default=5, help="batches before the timing starts (default 5)")
    p.add_argument("--batches", type=int, default=30, help="timed batches per case (default 30)")
    p.add_argument("--tfrecord", default=None, metavar="DIR", help="TFRecord folder for the dali-tfrecord case")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="write loaderbench.json and loaderbench.png here (a new folder)"
    )
    p.set_defaults(func=cmd_loaderbench)

    p = sub.add_parser("results", help="one row per configuration (cell) with its scaling efficiency and baseline")
    p.add_argument(
        "runs_dir", metavar="RUNS_DIR", nargs="?", default="runs", help="where the runs are (run.root; default runs)"
    )
    p.add_argument(
        "--scaling",
        choices=("weak", "strong"),
        default="weak",
        help="weak: fixed per-GPU batch (default); strong: fixed global batch",
    )
    p.add_argument(
        "--csv",
        metavar="DIR",
        help="also write the computed tables (runs, cells, breakdown, ...) as CSV to DIR (new folder)",
    )
    p.add_argument("--parquet", metavar="DIR", help="the same as Parquet files")
    p.add_argument(
        "--long",
        action="store_true",
        help="every variant in its column and every reason and error in full (default: fit 120 columns)",
    )
    p.set_defaults(func=cmd_results)

    from analysis.cli import add_parsers as add_analysis_parsers

    add_analysis_parsers(sub)  # ddlbench report | compare | synthlogs | predict

    p = sub.add_parser(
        "doctor",
        help="what this machine can run, and how to fix what it cannot",
        epilog="example:\n  ddlbench doctor framework=horovod loader=dali   # exit 1 if that run lacks a part",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="the run's overrides: check only what it needs (default: everything)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("demo", help="end to end on CPU: synthetic JPEGs, 2-rank DDP runs, results table")
    p.add_argument("--data", default="data/demo", help="dataset folder (made if absent)")
    p.add_argument("--runs", default="runs", help="runs root")
    p.set_defaults(func=cmd_demo)

    from launchers.campaign_cli import add_parser as add_campaign_parser

    add_campaign_parser(sub, run_cell=cmd_run)  # ddlbench campaign plan|submit|run|status

    from launchers.commbench import add_parser as add_commbench_parser

    add_commbench_parser(sub)  # ddlbench commbench (launchers/commbench.py; the ranks: benchmarks/commbench/)

    from launchers.stash import add_parser as add_stash_parser

    add_stash_parser(sub)  # ddlbench stash plan|run|report|netns-clean (launchers/stash.py, analysis/stash.py)

    from ddlbench.completion import add_parser as add_completion_parser

    add_completion_parser(sub, commands=sorted(sub.choices))  # ddlbench completion bash
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before or after a launcher ran (a run's own interruption: launchers/supervise.py)
        print("ddlbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
