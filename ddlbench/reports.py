"""`ddlbench results|report|compare|paper|synthetic-logs`: the tables, the report, two campaigns side by side, the
studies' figures (the analyses: analysis/)."""

from __future__ import annotations

import argparse
import sys
import textwrap
import warnings
from pathlib import Path

from benchmarks.errors import ConfigError


def cmd_results(args: argparse.Namespace) -> int:
    from analysis.campaign_analysis import CampaignAnalysis
    from analysis.campaigns import campaign_counts, campaign_folder, campaigns_line
    from analysis.results import WIDTH, export_tables, format_results, results_table

    one_line_warnings()

    root = runs_folder(args.runs_dir, usage="ddlbench results DIR")
    root = campaign_folder(root, getattr(args, "campaign", None), usage=f"ddlbench results {root} --campaign NAME")
    mode = getattr(args, "scaling", "weak")
    analysis = CampaignAnalysis(root)
    long = getattr(args, "long", False)
    if line := campaigns_line(root, campaign_counts(analysis.runs())):
        print(textwrap.fill(line, width=WIDTH, break_on_hyphens=False) + "\n")
    print(format_results(*results_table(root, mode=mode, analysis=analysis), mode=mode, long=long))
    code = 0
    if getattr(args, "check_mllog", False):
        from analysis.mllog_check import check_runs, failed, format_checks

        checks = check_runs(analysis.counted())
        print("\n" + format_checks(checks))
        code = 1 if failed(checks) else 0
    for fmt in ("csv", "parquet"):
        if getattr(args, fmt, None):
            written = export_tables(analysis, Path(getattr(args, fmt)), fmt=fmt)
            print(f"\n[ddlbench] wrote {', '.join(p.name for p in written)} to {getattr(args, fmt)}")
    return code


def one_line_warnings() -> None:
    """A skipped log line reads `ddlbench: warning: <file>:<line>: <what>`, not a Python source line."""
    plain = warnings.formatwarning

    def formatwarning(message, category, filename, lineno, line=None):
        from analysis.load import LogWarning

        if issubclass(category, LogWarning):
            return f"ddlbench: warning: {message}\n"
        return plain(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning


def runs_folder(runs_dir: str, *, usage: str) -> Path:
    """RUNS_DIR as a folder, or one line naming it and the fix (`results` and `report` default to runs/)."""
    root = Path(runs_dir)
    if not root.is_dir():
        raise ConfigError(
            f"RUNS_DIR {root} is not a directory; pass the folder runs were written to (run.root, default "
            f"runs/): {usage}"
        )
    return root


def cmd_report(args: argparse.Namespace) -> int:
    from analysis.campaigns import campaign_folder
    from analysis.report import build_report

    one_line_warnings()
    formats = tuple(f.strip() for f in args.formats.split(",") if f.strip())
    root = runs_folder(args.runs_dir, usage=f"ddlbench report DIR --out {args.out}")
    root = campaign_folder(
        root, getattr(args, "campaign", None), usage=f"ddlbench report {root} --campaign NAME --out {args.out}"
    )
    timings = build_report(
        root,
        Path(args.out),
        reference=args.reference,
        formats=formats,
        parquet=args.parquet,
        jobs=args.jobs,
    )
    print(
        f"[ddlbench] report of {timings['num_runs']} runs{timings['campaigns']} ({timings['num_counted']} counted, "
        f"{timings['num_step_rows']:,} step records, {timings['num_figures']} figures) -> "
        f"{Path(args.out) / 'report.md'} and report.html"
    )
    return 0


def cmd_paper(args: argparse.Namespace) -> int:
    from analysis.papers.build import build_paper, parse_baseline

    one_line_warnings()
    result = build_paper(
        args.study,
        Path(args.runs_dir),
        Path(args.out),
        baseline=parse_baseline(args.baseline or []),
        formats=("png",),
        jobs=args.jobs,
    )
    contents = result["contents"]
    states = contents["state"]
    drawn, part = int((states == "drawn").sum()), int(states.str.startswith("drawn in part").sum())
    lacking, text = int(states.str.startswith("lacks").sum()), int(states.str.startswith("text only").sum())
    print(
        f"[ddlbench] paper {args.study}: {len(contents)} figures, tables and claims of the study from "
        f"{result['num_runs']} runs: {drawn} drawn, {part} drawn in part, {lacking} lacking cells, {text} text only, "
        f"{len(contents) - drawn - part - lacking - text} not drawable here "
        f"({result['num_figures']} figures) -> {Path(args.out) / 'paper.md'} and paper.html"
    )
    for exhibit, cells, commands in result["lacking"]:
        print(f"  {exhibit} lacks {cells}\n    make them with: {' ; '.join(commands)}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Exit 1 on a regression, or on cells of A that B lacks or did not complete (unless --allow-missing).
    With --by KEY=A,B, the cells of one folder (or A's against B's) that differ only in KEY."""
    from analysis.campaign_analysis import CampaignAnalysis
    from analysis.compare import TOP1_DROP_PP, by_hint, differing_settings, parse_by
    from analysis.report import FAILING_FLAGS, format_compare

    one_line_warnings()
    if not 0 < args.threshold < 100:
        raise ConfigError(f"--threshold {args.threshold}: give a percentage between 0 and 100, e.g. --threshold 5")
    drop = TOP1_DROP_PP if args.top1_drop_pp is None else args.top1_drop_pp
    if not 0 <= drop < 100:
        raise ConfigError(f"--top1-drop-pp {drop}: give percentage points between 0 and 100, e.g. --top1-drop-pp 1")
    threshold = args.threshold / 100
    if args.by is None and args.b is None:
        raise ConfigError(
            f"compare {args.a}: give a second runs directory B, or --by KEY=A,B to compare the cells of "
            f"{args.a} that differ in one setting, e.g. --by framework=ddp,horovod"
        )
    by = parse_by(args.by) if args.by is not None else None
    roots = [Path(args.a)] if args.b is None else [Path(args.a), Path(args.b)]
    for option, root in zip(("A", "B"), roots):
        if not root.is_dir():
            raise ConfigError(
                f"{option}={root} is not a directory; pass two runs directories (campaigns), or one and --by"
            )
    analyses = [CampaignAnalysis(root) for root in roots]
    table = analyses[0].compare(analyses[-1], threshold=threshold, top1_drop_pp=drop, by=by)
    if by is not None:
        print(f"B = {by[0]}={by[2]} against A = {by[0]}={by[1]}, cells paired on every other setting\n")
    print(format_compare(table, threshold=threshold, top1_drop_pp=drop))
    paired = table["throughput_img_s_a"].notna() & table["throughput_img_s_b"].notna()
    hint = by_hint(analyses[0].runs(), analyses[1].runs()) if by is None and not paired.any() else None
    if hint is not None:
        key, value_a, value_b = hint
        print(
            f"\nNo cell of B is a cell of A: all of A has {key}={value_a}, all of B {key}={value_b}. To compare "
            f"them cell by cell on every other setting: ddlbench compare {args.a} {args.b} "
            f"--by {key}={value_a},{value_b}"
        )
    elif by is None and not paired.any() and (differ := differing_settings(analyses[0].runs(), analyses[1].runs())):
        print(
            f"\nNo cell of B is a cell of A: they differ in {'; '.join(differ)}. `--by KEY=A,B` pairs the cells "
            "that differ in one setting only"
        )
    failing = FAILING_FLAGS[:1] if args.allow_missing else FAILING_FLAGS
    return 1 if table["flag"].isin(failing).any() else 0


# the command's name until this release: it still works, once more, with a warning
OLD_SYNTHETIC_LOGS = "synthlogs"


def cmd_synthetic_logs(args: argparse.Namespace) -> int:
    if args.command == OLD_SYNTHETIC_LOGS:
        print(
            "ddlbench: warning: `synthlogs` is now `synthetic-logs`; the old name goes in the next release",
            file=sys.stderr,
        )
    from analysis.synthetic_logs.campaign import write_campaign
    from analysis.synthetic_logs.cells import bench_cells, lr_study_cells, small_cells

    cells = {"bench": bench_cells, "lr": lr_study_cells, "small": small_cells}[args.size]()
    stats = write_campaign(
        Path(args.out), cells, steps=args.steps, warmup_steps=args.warmup, seed=args.seed, campaign=args.campaign
    )
    print(
        f"[ddlbench] wrote {stats.num_runs} runs, {stats.num_ranks} ranks, {stats.num_step_rows:,} step records "
        f"({stats.num_bytes / 2**20:,.1f} MiB; {stats.fates}) to {Path(args.out) / args.campaign}",
        file=sys.stdout,
    )
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench results`, `report`, `paper`, `compare` and `synthetic-logs`: argparse only (each command
    imports its modules when it runs), so that `ddlbench --help` stays quick."""
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
    add_campaign_option(p)
    p.add_argument(
        "--check-mllog",
        action="store_true",
        help="run MLPerf's compliance checker (mlperf-logging) on the mllog.txt of each run with a target "
        "(run.target_top1): its errors in full, the submission-only keys apart; exit 1 on an error",
    )
    p.set_defaults(func=cmd_results)

    p = sub.add_parser("report", help="markdown + HTML report with tables and figures of a runs directory")
    p.add_argument(
        "runs_dir", metavar="RUNS_DIR", nargs="?", default="runs", help="where the runs are (run.root; default runs)"
    )
    p.add_argument("--out", required=True, help="new folder for report.md, report.html, figures/ (never overwritten)")
    add_campaign_option(p)
    p.add_argument(
        "--reference", choices=("aach2023",), help="overlay a shipped reference (seed study A's DDP breakdown)"
    )
    p.add_argument("--formats", default="png,svg", help="figure formats: png plus svg and/or pdf (default png,svg)")
    p.add_argument("--parquet", action="store_true", help="also export the tables as Parquet into OUT/parquet")
    p.add_argument("--jobs", type=int, default=None, help="processes drawing figures (default: one per CPU)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "paper",
        help="each figure and table of a seed study (aach2023, stash2021, composable2023) from your runs, "
        "beside the published values",
    )
    p.add_argument("study", metavar="STUDY", help="aach2023 | stash2021 | composable2023")
    p.add_argument("runs_dir", metavar="RUNS", help="the folder holding the study's runs (run.root or a campaign)")
    p.add_argument("--out", required=True, help="new folder for paper.md, paper.html, figures/ (never overwritten)")
    p.add_argument(
        "--baseline",
        action="append",
        metavar="system=PROFILE",
        help="the system the relative times are against (composable2023's Figure 11)",
    )
    p.add_argument("--jobs", type=int, default=None, help="processes drawing figures (default: one per CPU)")
    p.set_defaults(func=cmd_paper)

    p = sub.add_parser(
        "compare",
        help="per-cell throughput (and top-1, time-to-target) deltas of campaign B against campaign A "
        "(exit 1 on a regression or a cell of A missing in B)",
    )
    p.add_argument("a", metavar="A", help="baseline runs directory")
    p.add_argument("b", metavar="B", nargs="?", help="runs directory to check (with --by: optional, default A)")
    p.add_argument(
        "--by",
        metavar="KEY=A,B",
        help="compare the cells with KEY=B against those with KEY=A that differ in nothing else, e.g. "
        "--by framework=ddp,horovod or --by loader=native,dali (KEY: a group, as tables name its option, or a "
        "setting); in one folder, or A's cells against B's",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        help="flag cells slower by more than this percentage (default 5), and, where both sides have "
        "repeats, whose 95%% confidence intervals do not overlap",
    )
    p.add_argument(
        "--top1-drop-pp",
        type=float,
        default=None,
        help="flag cells whose final validation top-1 is lower by more than this many percentage points "
        "(default 1.0: analysis.compare.TOP1_DROP_PP; cells with evaluations in both); time to target is "
        "held to --threshold",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="do not fail on cells of A that B lacks or did not complete (they are still listed)",
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("synthetic-logs", help="write a synthetic campaign of run directories (tests, speed benchmark)")
    add_synthetic_logs_options(p)
    # the old name: no help line, so `--help` and docs/cli.md list the new name alone
    add_synthetic_logs_options(sub.add_parser(OLD_SYNTHETIC_LOGS, description="the old name of synthetic-logs"))


def add_campaign_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--campaign",
        metavar="NAME",
        help="only the runs of campaign NAME (the folder RUNS_DIR/NAME: run.campaign); without it a folder of "
        "several campaigns shows them side by side, a campaign column on every table",
    )


def add_synthetic_logs_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="new folder (never overwritten)")
    p.add_argument(
        "--size",
        choices=("small", "bench", "lr"),
        default="small",
        help="small: 16 runs of 1-4 ranks; bench: 55 runs, 1024 ranks; lr: a learning-rate study (3 schedules "
        "x 1, 2, 4 ranks, with evaluations)",
    )
    p.add_argument("--steps", type=int, default=500, help="steps per rank, warmup included")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--campaign", default="synth")
    p.set_defaults(func=cmd_synthetic_logs)
