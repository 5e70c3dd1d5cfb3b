"""`ddlbench preflight`: screen the nodes before a campaign spends its allocation (docs/preflight.md): a GEMM rate
on every GPU (or the CPU) of each node and the all-reduce bandwidth between pairs of nodes; the slow ones are
named, kept in runs/<campaign>/preflight/, and `campaign submit --preflight` excludes them. The launch and
the record are launchers/lifecycle/preflight/__init__.py, the measurement launchers/lifecycle/preflight/."""

from __future__ import annotations

import argparse
import sys

from launchers.lifecycle import preflight


def say(screen: preflight.Screen, *, kept: bool = False) -> None:
    """The table, the slow nodes (and whether they are excluded), the time spent and the files."""
    print(screen.table)
    slow = ",".join(screen.slow_nodes)
    if not slow:
        print("slow nodes: none")
    else:
        print(f"slow nodes: {slow}" + (" (kept: --keep-slow)" if kept else f" (campaign submit: --exclude={slow})"))
    print(f"preflight took {screen.spent_s:.1f} s; kept in {screen.csv_path} and {screen.json_path.name}")


def cmd_preflight(args: argparse.Namespace) -> int:
    from benchmarks.config import compose

    cfg = compose(args.overrides)
    try:
        screen = preflight.screen(cfg, budget_s=args.budget_s, nodes=args.nodes, dry_run=args.dry_run)
    except preflight.Failed as error:
        print(f"ddlbench: error: preflight: {error}", file=sys.stderr)
        return 1
    if screen is not None:
        say(screen)
    return 0


def add_budget(p: argparse.ArgumentParser, *, flag: str = "--budget-s") -> None:
    p.add_argument(
        flag,
        type=float,
        default=preflight.DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"the preflight's whole time, starting included (at most {preflight.MAX_BUDGET_S}); half of it measures",
    )


def add_parser(sub) -> None:
    p = sub.add_parser(
        "preflight",
        help="screen nodes: GEMM TFLOP/s per node, all-reduce GB/s per pair; name the slow ones (runs/<campaign>/preflight/)",
    )
    p.add_argument("overrides", nargs="*", help="system=<profile> run.campaign=<name> [more Hydra overrides]")
    add_budget(p)
    p.add_argument(
        "--nodes",
        type=int,
        default=None,
        help="outside an allocation: srun asks Slurm for this many nodes; inside one: this many of its nodes",
    )
    p.add_argument("--dry-run", action="store_true", help="print where it would run and the launch command only")
    p.set_defaults(func=cmd_preflight)
