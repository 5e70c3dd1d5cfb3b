"""`ddlbench run` (one run on this machine, or a sweep of them with -m) and `ddlbench demo` (end to end on a CPU)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.errors import ConfigError
from ddlbench.reports import cmd_results
from launchers.lifecycle.rundir_state import (
    CellCompleted,
    HeldElsewhere,
    next_free_repeat,
    repeat_is_fixed,
    take_run_dir,
)


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
    one run directory each; a summary line per run at the end. The same command resumes a sweep: a
    combination whose run completed is skipped, one that failed, was interrupted or died runs again, and one
    that a live run holds elsewhere is left to it (as `campaign run` does)."""
    combos = sweep(args.overrides)
    if any(o.startswith("run.dir=") for o in args.overrides):
        raise ConfigError("run.dir cannot be set with -m: every combination needs its own run directory; drop it")
    quiet = not (args.dry_run or getattr(args, "cfg", None))

    def varying(combo: list[str]) -> str:
        return " ".join(o for o, original in zip(combo, args.overrides) if o != original or "," in original)

    skipped: dict[int, str] = {}  # combination -> why it does not run: completed already, or running elsewhere
    for k, combo in enumerate(combos):  # bad input in any combination stops before anything runs; a dry run prints each
        try:
            code = cmd_run(
                argparse.Namespace(
                    overrides=combo,
                    dry_run=True,
                    quiet=quiet,
                    cfg=getattr(args, "cfg", None),
                    resolve=getattr(args, "resolve", False),
                    share=True,
                )
            )
        except (CellCompleted, HeldElsewhere) as held:
            skipped[k] = skip_reason(held)
            continue
        if code:
            return code
    for k, why in skipped.items():
        print(
            f"[ddlbench] multirun {k + 1}/{len(combos)}: {varying(combos[k]) or '(the base)'}: {why}", file=sys.stderr
        )
    if args.dry_run or getattr(args, "cfg", None):
        print(f"[ddlbench] multirun: {len(combos)} run(s) valid, {len(skipped)} of them skipped", file=sys.stderr)
        return 0
    results = []
    for k, combo in enumerate(combos):
        if k in skipped:
            continue
        print(
            f"[ddlbench] multirun {k + 1}/{len(combos)}: {varying(combo) or '(the base)'}", file=sys.stderr, flush=True
        )
        try:
            code = cmd_run(argparse.Namespace(overrides=combo, dry_run=False, share=True))
        except (CellCompleted, HeldElsewhere) as held:  # another launch took it since the check above
            skipped[k] = skip_reason(held)
            print(f"[ddlbench] multirun {k + 1}/{len(combos)}: {skipped[k]}", file=sys.stderr, flush=True)
            continue
        results.append((varying(combo), code))
        if code == 130:
            break  # interrupted: the rest does not start
    failed = [r for r in results if r[1]]
    kinds = [why.partition(" (")[0] for why in skipped.values()]  # completed already, running elsewhere
    counts = {kind: kinds.count(kind) for kind in sorted(set(kinds))}
    print(
        f"[ddlbench] multirun: {len(results) - len(failed)} of {len(combos)} run(s) completed"
        + "".join(f", {n} {why}" for why, n in counts.items())
        + "".join(f"\n  exit {code}: {what}" for what, code in failed),
        file=sys.stderr,
    )
    return 130 if results and results[-1][1] == 130 else (1 if failed else 0)


def skip_reason(held: ConfigError) -> str:
    """Why a combination of a sweep does not run: 'completed already' or 'running elsewhere (who)'."""
    if isinstance(held, CellCompleted):
        return "completed already (skipped)"
    return "running elsewhere (skipped): " + str(held).partition("is in use: ")[2].partition("; wait")[0]


def cmd_run(args: argparse.Namespace) -> int:
    """Validate everything, then start system.ranks_per_node local ranks with the framework's launcher (one
    process for a single-process framework, DataParallel, which drives them as GPUs: FrameworkConfig.local_layout);
    with system.hosts or system.hostfile, that many on each host (launchers/hosts.py)."""
    from benchmarks import affinity
    from benchmarks.config import compose
    from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
    from benchmarks.frameworks.configs import node_layout
    from benchmarks.validate import check_data, validate, warnings
    from launchers import hosts as several
    from launchers.launch import launch_run
    from launchers.lifecycle import liveness

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
    from benchmarks import adapters
    from benchmarks.validate import resolve_run_dir

    # constructing the adapters imports their libraries: a missing horovod, deepspeed, DALI (or transformers,
    # for the model's task) is a one-line error here, not a traceback from inside the launcher
    framework = adapters.build_framework(cfg)
    adapters.build_loader(cfg)
    adapters.build_task(cfg)
    nproc, devices_per_process = node_layout(cfg)
    spread = several.hosts_of(cfg.system)  # None: this machine alone
    num_nodes = len(spread.hosts) if spread else 1
    if spread and FRAMEWORKS[str(cfg.framework.name)].SINGLE_PROCESS:
        raise ConfigError(
            f"framework={cfg.framework.name} drives every GPU of a host from one process and cannot span "
            f"system.hosts; use framework=ddp across hosts"
        )
    world_size = nproc * devices_per_process * num_nodes  # the GPUs (or CPU ranks) trained on: g<W> of the run dir
    check_data(cfg, world_size=world_size)
    run_dir = resolve_run_dir(cfg, world_size=world_size, num_nodes=num_nodes)
    run_dir, repeat = take_run_dir(
        cfg,
        run_dir,
        world_size=world_size,
        num_nodes=num_nodes,
        next_if_held=not (repeat_is_fixed(args.overrides) or getattr(args, "share", False)),
        claim=not args.dry_run,
    )
    try:
        return launch_run(
            cfg,
            overrides=args.overrides,
            run_dir=run_dir,
            repeat=repeat,
            framework=framework,
            spread=spread,
            nproc=nproc,
            dry_run=args.dry_run,
            quiet=getattr(args, "quiet", False),
        )
    except BaseException:
        liveness.release(run_dir)  # a claim that never launched (an error before it) leaves nothing behind
        raise


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


def add_parser(sub) -> None:
    """Register `ddlbench run` and `ddlbench demo`."""
    from benchmarks.config_groups import groups_text

    p = sub.add_parser(
        "run",
        help="run one benchmark on this machine (system.ranks_per_node local ranks)",
        # the groups and their options, from the config's files (a user's DDLBENCH_CONFIG options too)
        epilog="config groups (group=option):\n  " + groups_text().replace("\n", "\n  ") + "\n\n"
        "any key of the config is set as key=value (ddlbench run --cfg job prints them all), e.g.\n"
        "  ddlbench run framework=horovod loader=native model=resnet model.depth=50 run.steps=50",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. framework=ddp loader=native model.depth=50")
    p.add_argument("--dry-run", action="store_true", help="validate and print the launch command only")
    p.add_argument(
        "-m",
        "--multirun",
        action="store_true",
        help="run every combination of comma-separated values (a=1,2 b=x,y: 4 runs), one run directory each; "
        "all are validated before the first starts; completed ones are skipped and failed, interrupted or dead "
        "ones run again, so the same command resumes a sweep",
    )
    p.add_argument(
        "--cfg", choices=("job",), default=None, help="print the composed config and exit (as Hydra's --cfg job)"
    )
    p.add_argument("--resolve", action="store_true", help="with --cfg: fill in interpolations")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="end to end on CPU: synthetic JPEGs, 2-rank DDP runs, results table")
    p.add_argument("--data", default="data/demo", help="dataset folder (made if absent)")
    p.add_argument("--runs", default="runs", help="runs root")
    p.set_defaults(func=cmd_demo)
