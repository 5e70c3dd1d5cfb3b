"""`ddlbench stash plan|run|report|netns-clean`: the commands; the study's plan and its runs are
launchers/stash.py (its keys launchers/stash_config.py), the stalls analysis/stash.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from launchers.stash import cold_cache_note, format_plan, plan, run_local, run_slurm


def cmd_plan(args: argparse.Namespace) -> int:
    stash, cfg, runs = plan(args.overrides)
    print(format_plan(stash, cfg, runs))
    note = cold_cache_note(cfg, runs)
    if note:
        print(note)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    stash, cfg, runs = plan(args.overrides)
    note = cold_cache_note(cfg, runs)
    if note:
        print(f"[ddlbench] {note}", file=sys.stderr)
    if args.slurm or stash.launcher == "slurm":
        return run_slurm(stash, cfg, runs, dry_run=args.dry_run)
    return run_local(stash, cfg, runs, dry_run=args.dry_run)


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.stash import stash_report

    stash, cfg, runs = plan(args.overrides)
    print(stash_report(stash, cfg, root=runs[0].run_dir.parent if runs else Path(cfg.run.root)))
    return 0


def cmd_netns_clean(args: argparse.Namespace) -> int:
    from launchers import netns

    gone = netns.clean()
    print(f"[ddlbench] deleted {len(gone)} namespace(s)" + (f": {', '.join(gone)}" if gone else ""))
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench stash plan|run|report|netns-clean`."""
    p = sub.add_parser("stash", help="Stash stalls: paired runs -> interconnect, network, CPU and disk stalls, cost")
    actions = p.add_subparsers(dest="stash_command", required=True, metavar="ACTION")
    for name, func, text in (
        ("plan", cmd_plan, "print the paired runs"),
        ("run", cmd_run, "run the missing ones (locally, or --slurm)"),
        ("report", cmd_report, "stalls in s and %% of the baseline, model view, cost"),
    ):
        a = actions.add_parser(name, help=text)
        a.add_argument("overrides", nargs="*", help="Hydra overrides and stash.* keys (stash.gpus=2 stash.nodes=2 ...)")
        if name == "run":
            a.add_argument("--slurm", action="store_true", help="submit through Slurm (as stash.launcher=slurm)")
            a.add_argument("--dry-run", action="store_true", help="print the commands only")
        a.set_defaults(func=func)
    a = actions.add_parser("netns-clean", help="delete every ddlb-* network namespace (after a killed run)")
    a.set_defaults(func=cmd_netns_clean)
