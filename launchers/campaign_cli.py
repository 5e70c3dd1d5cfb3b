"""`ddlbench campaign plan|submit|status`: the commands over launchers/campaign.py (the grid),
launchers/submit.py (sbatch and the ledger) and launchers/scheduler.py (what Slurm says).

    ddlbench campaign plan   experiment=aach2023_scaling system=juwels_booster [--dry-run]
    ddlbench campaign submit experiment=slurm_smoke system=slurm_cpu [--max-jobs 8] [--array] [--dry-run]
    ddlbench campaign status experiment=slurm_smoke system=slurm_cpu

`submit` sends only cells that are missing or failed (and not queued). With --array, cells of the
same shape (nodes x ranks per node) go as one Slurm job array, throttled by Slurm itself with
--max-jobs (--array=0-K%N).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from launchers import submit
from launchers.campaign import Cell, plan


def format_table(rows: list[tuple[Cell, str, str]]) -> str:
    header = ("cell", "gpus", "nodes", "ranks/node", "state", "detail")
    lines = [header] + [
        (c.name, str(c.num_gpus), str(c.num_nodes or "-"), str(c.ranks_per_node or "-"), s, d) for c, s, d in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)) + "  " + line[-1] for line in lines).rstrip()


def summary_line(rows: list[tuple[Cell, str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, state, _ in rows:
        counts[state] = counts.get(state, 0) + 1
    return f"{len(rows)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def cmd_plan(args: argparse.Namespace) -> int:
    cfg, cells = plan(args.overrides)
    rows = [(c, "impossible" if c.problem else "planned", c.problem or "") for c in cells]
    if args.dry_run:
        for cell in cells:
            if not cell.problem:
                print(shlex.join(submit.sbatch_command(cfg, cell, args.overrides)))
        return 0
    print(format_table(rows))
    print(f"campaign {cfg.run.campaign} on system={cfg.system.name}: {summary_line(rows)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cfg, cells = plan(args.overrides)
    rows = submit.cell_states(cfg, cells)
    print(format_table(rows))
    print(f"campaign {cfg.run.campaign} on system={cfg.system.name}: {summary_line(rows)}")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the missing and failed cells: one job each, at most --max-jobs of this campaign queued at
    once; or, with --array, one job array per shape that Slurm throttles to --max-jobs running tasks."""
    cfg, cells = plan(args.overrides, check_data_set=True)
    rows = submit.cell_states(cfg, cells)
    todo = [(c, s) for c, s, _ in rows if s in submit.SUBMIT_STATES]
    queued = sum(1 for _, s, _ in rows if s in ("pending", "running"))
    room = len(todo) if args.max_jobs is None or args.array else max(0, args.max_jobs - queued)
    try:
        submitted = submit.submit_cells(
            cfg, todo[:room], overrides=args.overrides, array=args.array, max_jobs=args.max_jobs, dry_run=args.dry_run
        )
    except submit.Refused as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        return 1
    chosen = min(len(todo), room)
    left = len(todo) - chosen
    verb = "would submit" if args.dry_run else "submitted"
    print(
        f"campaign {cfg.run.campaign}: {verb} {chosen if args.dry_run else submitted}, "
        f"{queued} already queued, {sum(1 for _, s, _ in rows if s == 'completed')} completed, "
        f"{sum(1 for _, s, _ in rows if s == 'impossible')} impossible"
        + (f", {left} held back by --max-jobs {args.max_jobs} (run submit again later)" if left else "")
    )
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench campaign plan|submit|status` on the ddlbench CLI."""
    p = sub.add_parser("campaign", help="plan, submit and follow a Slurm campaign (an experiment's campaign: grid)")
    actions = p.add_subparsers(dest="campaign_command", required=True, metavar="ACTION")
    for name, func, text in (
        ("plan", cmd_plan, "print the table of jobs (impossible cells say why)"),
        ("submit", cmd_submit, "submit missing or failed cells"),
        ("status", cmd_status, "completed/running/failed/missing per cell"),
    ):
        a = actions.add_parser(name, help=text)
        a.add_argument("overrides", nargs="*", help="experiment=<name> system=<profile> [more Hydra overrides]")
        if name in ("plan", "submit"):
            a.add_argument("--dry-run", action="store_true", help="print the exact sbatch commands only")
        if name == "submit":
            a.add_argument(
                "--max-jobs",
                type=int,
                default=None,
                help="at most this many jobs of the campaign queued at once (with --array: running at once)",
            )
            a.add_argument(
                "--array",
                action="store_true",
                help="submit cells of the same shape as one Slurm job array (throttled by --max-jobs)",
            )
        a.set_defaults(func=func)
