"""`ddlbench campaign plan|submit|run|status`: the commands over launchers/campaign.py (the grid),
launchers/submit.py (sbatch and the ledger) and launchers/scheduler.py (what Slurm says).

    ddlbench campaign plan   experiment=aach2023_scaling system=juwels_booster [--dry-run]
    ddlbench campaign submit experiment=slurm_smoke system=slurm_cpu [--max-jobs 8] [--array] [--dry-run]
    ddlbench campaign submit ... --preflight [--keep-slow]     # screen nodes first, exclude the slow (docs/preflight.md)
    ddlbench campaign run    experiment=aach2023_lr_cpu data.path=data/learn     # here, no Slurm
    ddlbench campaign status experiment=slurm_smoke system=slurm_cpu

`run` runs the missing and failed one-node cells on this machine, one after the other, through
`ddlbench run` (the same run directories a Slurm job would write, so `status` and the analysis see one
campaign whichever way its cells ran).

`submit` sends only cells that are missing or failed (and not queued). With --array, cells of the
same shape (nodes x ranks per node) go as one Slurm job array, throttled by Slurm itself with
--max-jobs (--array=0-K%N).
"""

from __future__ import annotations

import argparse
import shlex
import sys

from ddlbench.preflight import add_budget
from launchers import scheduler, submit
from launchers.campaign import Cell, plan, reasons
from launchers.lifecycle.preflight import Failed


def format_table(rows: list[tuple[Cell, str, str]]) -> str:
    header = ("cell", "gpus", "nodes", "ranks/node", "state", "detail")
    lines = [header] + [
        (c.name, str(c.num_gpus), str(c.num_nodes or "-"), str(c.ranks_per_node or "-"), s, d) for c, s, d in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)) + "  " + line[-1] for line in lines).rstrip()


def grouped(
    rows: list[tuple[Cell, str, str]], *, state: str = "impossible", keep: int = 3
) -> list[tuple[Cell, str, str]]:
    """The rows with every run of `state` rows that share a detail (an impossible cell's reason) folded
    into its first `keep` and one line that counts the rest: 486 cells with one unset variable read as one reason."""
    by_reason: dict[str, list[Cell]] = {}
    for cell, s, detail in rows:
        if s == state:
            by_reason.setdefault(detail, []).append(cell)
    out, shown = [], {reason: 0 for reason in by_reason}
    for cell, s, detail in rows:
        if s != state:
            out.append((cell, s, detail))
            continue
        shown[detail] += 1
        count = len(by_reason[detail])
        if shown[detail] <= keep or count == keep + 1:
            out.append((cell, s, detail if shown[detail] == 1 else "(the same)"))
        elif shown[detail] == keep + 1:
            out.append((_More(count - keep), s, "(the same)"))
    return out


class _More:
    """A table row standing for the cells a grouped reason folds."""

    def __init__(self, count: int) -> None:
        self.name, self.num_gpus, self.num_nodes, self.ranks_per_node = f"... {count} more", "", "", ""


def hours(time_limit: str) -> float:
    """Slurm's --time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in hours."""
    from benchmarks.errors import ConfigError

    days, _, clock = time_limit.rpartition("-")
    try:
        parts = [float(p) for p in clock.split(":")]
        float(days or 0)
    except ValueError:
        raise ConfigError(
            f"system.time_limit={time_limit} is no Slurm time limit the cost can be counted from; "
            "write MM, HH:MM:SS or D-HH:MM:SS, e.g. system.time_limit=01:00:00"
        ) from None
    if days:
        h, m, sec = (parts + [0.0, 0.0])[:3]
    else:
        h, m, sec = {1: (0.0, parts[0], 0.0), 2: (0.0, *parts)}.get(len(parts), tuple(parts))
    return float(days or 0) * 24 + h + m / 60 + sec / 3600


def cost_line(cfg, cells: list[Cell]) -> str:
    """At most how many node-hours (and GPU-hours) the possible cells take, at system.time_limit each."""
    possible = [c for c in cells if not c.problem]
    limit = hours(str(cfg.system.time_limit))
    nodes = sum(c.num_nodes for c in possible) * limit
    gpus = sum(c.num_gpus for c in possible) * limit
    unit = "GPU-hours" if cfg.system.device == "cuda" else "rank-hours"
    return (
        f"at most {nodes:,.1f} node-hours, {gpus:,.1f} {unit} for {len(possible)} job(s) at "
        f"system.time_limit={cfg.system.time_limit} each"
    )


def summary_line(rows: list[tuple[Cell, str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, state, _ in rows:
        counts[state] = counts.get(state, 0) + 1
    return f"{len(rows)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def print_reasons(cells: list[Cell]) -> int:
    """Why cells cannot run, on stderr (a dry run's stdout is sbatch lines only): one line per reason with
    the number of cells it stops; the number of impossible cells."""
    why = reasons(cells)
    for count, reason in why:
        print(f"[ddlbench] {count} cell(s) impossible: {reason}", file=sys.stderr)
    return sum(count for count, _ in why)


def say_impossible(cfg, cells: list[Cell]) -> bool:
    """print_reasons; True when they stop every cell, after one error line saying so."""
    if cells and print_reasons(cells) == len(cells):
        print(
            f"ddlbench: error: every one of the {len(cells)} cells of campaign {cfg.run.campaign} is impossible, "
            "for the reason(s) above",
            file=sys.stderr,
        )
        return True
    return False


def cmd_plan(args: argparse.Namespace) -> int:
    """The table of the grid's cells; an impossible one (an unset data path too) is a row with its reason."""
    cfg, cells = plan(args.overrides)
    rows = [(c, "impossible" if c.problem else "planned", c.problem or "") for c in cells]
    shared = submit.shared_nodes_warning(cfg.system)
    if shared:
        print(f"[ddlbench] warning: {shared}", file=sys.stderr)
    if args.dry_run:
        print_reasons(cells)
        for cell in cells:
            if not cell.problem:
                print(shlex.join(submit.sbatch_command(cfg, cell, args.overrides)))
        return 0
    print(format_table(grouped(rows)))
    print(f"campaign {cfg.run.campaign} on system={cfg.system.name}: {summary_line(rows)}; {cost_line(cfg, cells)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cfg, cells = plan(args.overrides)
    rows = submit.cell_states(cfg, cells, strict=False)
    if not scheduler.available():
        print("[ddlbench] Slurm is not installed here: states come from the run directories only", file=sys.stderr)
    print(format_table(grouped(rows)))
    print(f"campaign {cfg.run.campaign} on system={cfg.system.name}: {summary_line(rows)}")
    return 0


def warn_node_python(cfg) -> None:
    """One warning line when the compute nodes may not see the Python the jobs run (launchers/node_python.py)."""
    from launchers.node_python import python_warning

    nodes = scheduler.partition_nodes(cfg.system.partition) if scheduler.available() else None
    warning = python_warning(cfg.system, nodes=nodes)
    if warning:
        print(f"[ddlbench] warning: {warning}", file=sys.stderr)


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the missing and failed cells: one job each, at most --max-jobs of this campaign queued at
    once; or, with --array, one job array per shape that Slurm throttles to --max-jobs running tasks."""
    cfg, cells = plan(args.overrides)
    if say_impossible(cfg, cells):
        return 2
    if args.keep_slow and not args.preflight:
        from benchmarks.errors import ConfigError

        raise ConfigError("--keep-slow keeps the slow nodes a preflight names: pass it with --preflight")
    submit.check_can_submit(cfg, dry_run=args.dry_run)  # before a preflight spends an allocation
    warn_node_python(cfg)
    rows = submit.cell_states(cfg, cells, strict=not args.dry_run)
    todo = [(c, s) for c, s, _ in rows if s in submit.SUBMIT_STATES]
    try:
        exclude = screened(cfg, cells, args) if args.preflight and todo else []
    except Failed as error:
        print(
            f"ddlbench: error: preflight: {error}; nothing was submitted (submit without --preflight to skip it)",
            file=sys.stderr,
        )
        return 1
    queued = sum(1 for _, s, _ in rows if s in ("pending", "running"))
    # --max-jobs is one limit for the campaign, jobs already queued included
    free = None if args.max_jobs is None else max(0, args.max_jobs - queued)
    room = len(todo) if free is None or args.array else free
    try:
        submitted = submit.submit_cells(
            cfg,
            todo[:room],
            overrides=args.overrides,
            array=args.array,
            max_jobs=free,
            dry_run=args.dry_run,
            exclude=exclude,
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


def screened(cfg, cells: list[Cell], args: argparse.Namespace) -> list[str]:
    """The nodes the campaign's jobs exclude (sbatch --exclude): --preflight screens them now, before anything is
    queued; a dry run starts nothing and takes the newest preflight kept in the campaign (or none);
    --keep-slow records the slow nodes and excludes none."""
    from ddlbench.preflight import say
    from launchers.lifecycle import preflight

    campaign = cfg.run.campaign
    if args.dry_run:
        found = preflight.newest(cfg)
        if found is None:
            print(
                f"[ddlbench] --preflight --dry-run starts nothing, and campaign {campaign} has no preflight yet: "
                f"the jobs below exclude no node (ddlbench preflight run.campaign={campaign} ... screens them)",
                file=sys.stderr,
            )
            return []
        path, document = found
        slow = list(document["exclude"])
        print(
            f"[ddlbench] --preflight --dry-run starts nothing: campaign {campaign}'s newest preflight, {path} "
            f"({document['when_utc']}), names slow: {','.join(slow) or 'none'}",
            file=sys.stderr,
        )
    else:
        screen = preflight.screen(cfg, budget_s=args.preflight_budget_s, nodes=preflight.campaign_nodes(cfg, cells))
        say(screen, kept=args.keep_slow)
        slow = list(screen.slow_nodes)
    if args.keep_slow and slow:
        print(f"[ddlbench] --keep-slow: {','.join(slow)} stay(s) in the jobs' reach", file=sys.stderr)
        return []
    return slow


def cmd_run_here(args: argparse.Namespace) -> int:
    """Run the missing and failed cells that fit on one node here, one after the other (ddlbench run with
    the cell's overrides and system.ranks_per_node = its GPUs); every cell is validated first. The CLI hands
    each through `ddlbench run`. A cell that a live run holds (another `campaign run`, a Slurm job) is left
    to it: two `campaign run` of one campaign share its cells."""
    from ddlbench.run import cmd_run, skip_reason
    from launchers.lifecycle.rundir_state import CellCompleted, HeldElsewhere

    cfg, cells = plan(args.overrides)
    if say_impossible(cfg, cells):
        return 2
    rows = submit.cell_states(cfg, cells)
    todo = [c for c, s, _ in rows if s in submit.SUBMIT_STATES and c.num_nodes == 1]
    elsewhere = [c for c, s, _ in rows if s in submit.SUBMIT_STATES and c.num_nodes > 1]
    held = [c.name for c, s, _ in rows if s == "running"]  # a live run of it, here or in a job
    base = [o for o in args.overrides if not o.startswith("campaign.")]
    commands = [[*cell.overrides(base), f"system.ranks_per_node={cell.num_gpus}"] for cell in todo]
    for overrides in commands:  # bad input in any cell stops before anything runs; a dry run prints each
        try:
            code = cmd_run(argparse.Namespace(overrides=overrides, dry_run=True, quiet=not args.dry_run))
        except (CellCompleted, HeldElsewhere):
            continue  # another launch took it since the states were read: it is skipped below too
        if code:
            return code
    skipped = f", {len(elsewhere)} multi-node cell(s) left to campaign submit" if elsewhere else ""
    if args.dry_run:
        print(f"campaign {cfg.run.campaign}: would run {len(todo)} cell(s) here{skipped}")
        return 0
    failed, code, ran, done_meanwhile = [], 0, 0, 0
    for k, (cell, overrides) in enumerate(zip(todo, commands), 1):
        print(f"[ddlbench] campaign {cfg.run.campaign} {k}/{len(todo)}: {cell.name}", file=sys.stderr, flush=True)
        try:
            code = cmd_run(argparse.Namespace(overrides=overrides, dry_run=False))
        except (CellCompleted, HeldElsewhere) as taken:  # another launch took it since the states were read
            print(f"[ddlbench] {cell.name}: {skip_reason(taken)}", file=sys.stderr, flush=True)
            if isinstance(taken, HeldElsewhere):
                held.append(cell.name)
            else:
                done_meanwhile += 1
            code = 0
            continue
        ran += code == 0
        if code:
            failed.append(cell.name)
        if code == 130:
            break  # interrupted: the rest does not start
    done = sum(1 for _, s, _ in rows if s == "completed")
    print(
        f"campaign {cfg.run.campaign}: ran {ran} of {len(todo)} cell(s) here, "
        f"{done + done_meanwhile} were already completed, running elsewhere: {len(held)}{skipped}"
        + "".join(f"\n  failed: {name}" for name in failed)
    )
    return 130 if code == 130 else (1 if failed else 0)


def add_parser(sub) -> None:
    """Register `ddlbench campaign plan|submit|run|status`."""
    p = sub.add_parser(
        "campaign", help="plan, submit (Slurm) or run (here) and follow a campaign (an experiment's campaign: grid)"
    )
    actions = p.add_subparsers(dest="campaign_command", required=True, metavar="ACTION")
    for name, func, text in (
        ("plan", cmd_plan, "print the table of jobs (impossible cells say why)"),
        ("submit", cmd_submit, "submit missing or failed cells"),
        ("run", cmd_run_here, "run missing or failed one-node cells here, one after the other (no Slurm)"),
        ("status", cmd_status, "completed/running/failed/missing per cell"),
    ):
        a = actions.add_parser(name, help=text)
        a.add_argument("overrides", nargs="*", help="experiment=<name> system=<profile> [more Hydra overrides]")
        if name in ("plan", "submit"):
            a.add_argument("--dry-run", action="store_true", help="print the exact sbatch commands only")
        if name == "run":
            a.add_argument("--dry-run", action="store_true", help="validate every cell and print its command only")
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
            a.add_argument(
                "--preflight",
                action="store_true",
                help="screen the nodes first (ddlbench preflight) and keep the jobs off the slow ones (sbatch "
                "--exclude); a dry run takes the campaign's newest preflight",
            )
            a.add_argument("--keep-slow", action="store_true", help="with --preflight: name slow nodes, exclude none")
            add_budget(a, flag="--preflight-budget-s")
        a.set_defaults(func=func)
