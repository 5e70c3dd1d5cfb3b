"""Speed of `ddlbench report` (issue 8's goal, issue 36's item 4): the speed benchmark's synthetic
campaign (analysis.synthetic_logs.cells.bench_cells: 55 runs, 1024 ranks) turned into every table, figure and
the report on the 2-core dev machine.

    case   rows                                   goal
    1x     1024 ranks x 500 steps  (~0.46M rows)  <= 10 s
    10x    1024 ranks x 5000 steps (~4.6M rows)   <= 30 s   (the same cells, ten times the steps)

Not a test: it prints the measured figures next to the goals. Each measurement is a fresh process
running `ddlbench report` (imports included), wall and CPU time (the figure workers' too) with the
stages build_report times (ingest, metrics, figures, writing). The machine is shared, so the load
average is printed beside each row. With --baseline, a second checkout (e.g. a `git worktree` of the
commit before a change) is measured on the same logs, alternating with this one, and the ratio printed.

    python perf/analysis_speed.py [--cases 1x,10x] [--repeats 2] [--baseline DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
CASES = {"1x": (500, 10.0), "10x": (5000, 30.0)}  # steps per rank, goal in seconds

# `ddlbench report` in the checkout on PYTHONPATH; its build_report's stage times are kept on the way
CHILD = r"""
import json, sys, warnings
from pathlib import Path
import analysis.report as report
runs, out, formats, jobs = sys.argv[1:5]
stages = {}
build_report = report.build_report
def timed(*args, **kwargs):
    stages.update(build_report(*args, **kwargs))
    return stages
report.build_report = timed
warnings.simplefilter("ignore")  # the campaign holds a corrupt line and a truncated run on purpose
try:
    from ddlbench.cli import main
except ImportError:  # a checkout from before the ddlbench command
    timed(Path(runs), Path(out), reference="aach2023", formats=tuple(formats.split(",")), jobs=int(jobs) or None)
else:
    jobs = ["--jobs", jobs] if int(jobs) else []
    if rc := main(["report", runs, "--out", out, "--reference", "aach2023", "--formats", formats, *jobs]):
        sys.exit(rc)
print(json.dumps({k: v for k, v in stages.items() if isinstance(v, (int, float))}))
"""


def campaign(base: Path, steps: int) -> Path:
    """The bench campaign with `steps` steps per rank under base (kept: reused when already there)."""
    runs = base / f"runs-{steps}"
    if (runs / "synth").is_dir():
        return runs
    from analysis.synthetic_logs.campaign import write_campaign
    from analysis.synthetic_logs.cells import bench_cells

    t = time.perf_counter()
    stats = write_campaign(runs, bench_cells(), steps=steps)
    print(
        f"generated {runs}: {stats.num_runs} runs, {stats.num_ranks} ranks x {steps} steps, "
        f"{stats.num_step_rows:,} step rows, {stats.num_bytes / 2**20:,.0f} MiB in {time.perf_counter() - t:.0f} s"
    )
    return runs


def measure(checkout: Path, runs: Path, out: Path, formats: str, jobs: int) -> dict[str, float]:
    """One fresh `ddlbench report` of runs by the code in checkout: wall and CPU (with its children) seconds."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    load1 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(runs), str(out), formats, str(jobs)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    wall_s = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"ddlbench report in {checkout} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    stages = json.loads(done.stdout.strip().splitlines()[-1])
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**stages, "wall_s": wall_s, "cpu_s": cpu_s, "load1": load1}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="1x,10x", help="1x, 10x or both (default 1x,10x)")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per case and checkout")
    parser.add_argument("--baseline", help="another checkout (a git worktree) to measure on the same logs")
    parser.add_argument("--keep", help="folder for the campaigns (reused when there) and reports; default a temp dir")
    parser.add_argument("--formats", default="png,svg")
    parser.add_argument("--jobs", type=int, default=0, help="figure worker processes (default: one per CPU)")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if unknown := [c for c in cases if c not in CASES]:
        parser.error(f"--cases {','.join(unknown)}: use 1x, 10x or 1x,10x")
    checkouts = {"this": HERE}
    if args.baseline:
        checkouts = {"baseline": Path(args.baseline).resolve(), **checkouts}
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ddlbench-analysis-speed-"))
    base.mkdir(parents=True, exist_ok=True)

    print(f"{os.cpu_count()} CPUs; " + "; ".join(f"{name}: {path}" for name, path in checkouts.items()))
    for case in cases:
        steps, goal_s = CASES[case]
        runs = campaign(base, steps)
        results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
        print(f"\n{case}: 1024 ranks x {steps} steps, goal <= {goal_s:g} s")
        header = f"{'checkout':<10}{'wall s':>8}{'CPU s':>8}{'imports+':>9}{'ingest':>8}{'metrics':>8}{'figures':>8}"
        print(f"{header}{'write':>7}{'load avg':>9}  rows")
        for repeat in range(args.repeats):
            order = list(checkouts) if repeat % 2 == 0 else list(reversed(checkouts))  # ABBA: drift cancels
            for name in order:
                out = base / f"report-{case}-{name}-{repeat}-{time.time_ns()}"
                r = measure(checkouts[name], runs, out, args.formats, args.jobs)
                results[name].append(r)
                rest = r["wall_s"] - r["load_s"] - r["metrics_s"] - r["figures_s"] - r["write_s"]
                print(
                    f"{name:<10}{r['wall_s']:>8.2f}{r['cpu_s']:>8.2f}{rest:>9.2f}{r['load_s']:>8.2f}"
                    f"{r['metrics_s']:>8.2f}{r['figures_s']:>8.2f}{r['write_s']:>7.2f}{r['load1']:>9.1f}"
                    f"  {int(r['num_step_rows']):,}"
                )
        medians = {name: statistics.median(r["wall_s"] for r in rows) for name, rows in results.items()}
        for name, wall_s in medians.items():
            print(
                f"{name:<10}median wall {wall_s:.2f} s against the goal {goal_s:g} s: {'OK' if wall_s <= goal_s else 'OVER'}"
            )
        if "baseline" in medians:
            print(f"baseline / this: {medians['baseline'] / medians['this']:.2f}x (median wall)")
    print("\nimports+: Python start, imports and the CLI (wall less the timed stages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
