"""`ddlbench history`: index completed runs of any number of run roots into one SQLite store, show each cell
over time with its change points, and `--check` for a centre's CI (analysis/history/, docs/history.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks.errors import ConfigError

# the figures the rule can follow, and which way is better
METRICS = {
    "throughput_img_s": True,
    "per_gpu_img_s": True,
    "efficiency": True,
    "mfu": True,
    "energy_j_per_sample": False,
    "step_s_median": False,
    "step_s_cv": False,
}

EPILOG = """examples:
  ddlbench history runs/                         index runs/ into runs/history.sqlite, print each cell over time
  ddlbench history runs/ /shared/site-b/runs --store ~/cluster.sqlite
  ddlbench history --check runs/                 exit 1 when any cell's newest campaign is worse beyond its noise
  ddlbench history --store ~/cluster.sqlite --html history-page/
  sqlite3 runs/history.sqlite "SELECT label, campaign, started, throughput_img_s, torch FROM history"

The store is upserted by run identity (cell hash, run directory name, start time): reading the same or
overlapping roots again adds nothing twice and loses nothing. Rule and schema: docs/history.md."""


def _progress(stats) -> None:
    print(
        f"[ddlbench] history: {stats.num_seen:,} run directories read ({stats.num_added:,} new, "
        f"{stats.num_known:,} known, {stats.num_skipped:,} not completed) in {stats.seconds:.1f} s",
        file=sys.stderr,
    )


def cmd_history(args: argparse.Namespace) -> int:
    """Index, print, check; exit 1 where --check finds a cell worse beyond its noise."""
    from analysis.history.index import index_roots
    from analysis.history.store import default_store, read_store
    from analysis.history.trend import change_points, check, check_lines

    roots = [Path(r) for r in args.roots]
    if not roots and not args.store:
        raise ConfigError("ddlbench history needs a ROOT to index or --store PATH to read, e.g. ddlbench history runs/")
    if not 0 <= args.min_change_pct < 100:
        raise ConfigError(f"--min-change-pct {args.min_change_pct}: give a percentage in [0, 100), e.g. 5")
    store = Path(args.store) if args.store else default_store(roots)
    if roots:
        stats = index_roots(roots, store, refresh=args.refresh, progress=_progress, every=args.progress_every)
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(stats.skipped.items(), key=lambda i: -i[1])[:4])
        print(f"[ddlbench] history: store {store}{f' (skipped: {why})' if why else ''}", file=sys.stderr)
    runs = read_store(store)
    if args.cell:
        runs = runs[runs["label"].str.contains(args.cell, regex=False) | runs["cell_hash"].eq(args.cell)]
    runs = runs[runs[args.metric].notna()]
    if runs.empty:
        print(f"[ddlbench] history: no completed run with {args.metric} in {store}")
        return 0
    changes = change_points(
        runs,
        value=args.metric,
        higher_is_better=METRICS[args.metric],
        confidence=args.confidence,
        min_change=args.min_change_pct / 100,
    )
    rule = (
        f"rule: a campaign is a change where its mean {args.metric} differs from the reference's by more than the "
        f"t-interval ({args.confidence:.0%}) of the run-to-run noise and by {args.min_change_pct:g}% or more"
    )
    shown = changes[["label", "campaign", "date", "num_runs", "mean", "std", "verdict", "change_pct", "threshold_pct"]]
    print(shown.assign(date=shown["date"].str[:16]).round(1).to_string(index=False))
    found = changes[changes["verdict"] == "change"]
    for row in found.itertuples(index=False):
        print(
            f"\nchange: {row.label} at campaign {row.campaign} ({str(row.date)[:16]}): {row.change_pct:+.1f}% "
            f"({row.direction}; noise allows ±{row.threshold_pct:.1f}% from {row.noise_from})\n  differs: {row.differs}"
        )
    if args.html:
        from analysis.history.page import write_page

        page = write_page(runs, changes, Path(args.html), value=args.metric, rule=rule)
        print(f"[ddlbench] history page -> {page}")
    if args.check:
        failures = check(changes)
        if not failures.empty:
            print("\nddlbench history --check: FAIL", file=sys.stderr)
            for line in check_lines(failures, unit=args.metric):
                print(f"  {line}", file=sys.stderr)
            return 1
        print(f"\nddlbench history --check: ok ({changes['series'].nunique()} cells, newest campaigns within noise)")
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench history`."""
    p = sub.add_parser(
        "history",
        help="keep every completed run of many campaigns in one store; trends, change points, a CI check",
        description=(
            "Index the completed runs below each ROOT (several sites' too) into a SQLite store, then print each "
            "cell's campaigns over time with the change points the run-to-run noise allows, and what differs "
            "across each change (versions, hosts, image, settings outside the cell)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("roots", nargs="*", metavar="ROOT", help="run roots to index (run.root folders); none: read --store")
    p.add_argument("--store", help="the SQLite store (default: <first ROOT>/history.sqlite); created when new")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when the newest campaign of any cell is worse than its reference beyond its noise",
    )
    p.add_argument("--html", metavar="DIR", help="write history.html, history.md and figures/ to DIR (a new folder)")
    p.add_argument("--metric", choices=sorted(METRICS), default="throughput_img_s", help="the figure the rule follows")
    p.add_argument("--cell", help="only cells whose label contains this text (or this cell hash)")
    p.add_argument(
        "--confidence", type=float, choices=(0.90, 0.95, 0.99), default=0.95, help="of the noise's t-interval"
    )
    p.add_argument(
        "--min-change-pct", type=float, default=5.0, help="the smallest step called a change, whatever the noise (5)"
    )
    p.add_argument("--refresh", action="store_true", help="read runs already in the store again (replaced in place)")
    p.add_argument("--progress-every", type=int, default=1000, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_history)
