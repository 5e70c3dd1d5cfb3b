"""`ddlbench doctor`: what this machine can run, and how to fix what it cannot (the checks: benchmarks/doctor.py)."""

from __future__ import annotations

import argparse
import sys


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


def add_parser(sub) -> None:
    """Register `ddlbench doctor`."""
    p = sub.add_parser(
        "doctor",
        help="what this machine can run, and how to fix what it cannot",
        epilog="example:\n  ddlbench doctor framework=horovod loader=dali   # exit 1 if that run lacks a part",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="the run's overrides: check only what it needs (default: everything)")
    p.set_defaults(func=cmd_doctor)
