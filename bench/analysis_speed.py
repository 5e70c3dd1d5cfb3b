"""Speed of the analysis path (issue 8's target: a synthetic 1024-rank x 500-step campaign, about 512k
step rows, ingested and turned into all figures and the report in <= 10 s on the 2-core dev machine).

Not a test: it prints the measured figures next to the target. Wall time depends on what else runs
on the machine, so CPU time of this process and the load average are printed as well.

    python bench/analysis_speed.py [--keep DIR] [--formats png,svg]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

TARGET_S = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", help="write the campaign and report here (a new folder) instead of a temp dir")
    parser.add_argument("--formats", default="png,svg")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--jobs", type=int, help="figure worker processes (default: one per CPU)")
    args = parser.parse_args()

    from analysis.synthlogs import bench_cells, write_campaign

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ddlbench-analysis-speed-"))
    t = time.perf_counter()
    stats = write_campaign(base / "runs", bench_cells(), steps=args.steps)
    gen_s = time.perf_counter() - t
    print(
        f"generated {stats.num_runs} runs, {stats.num_ranks} ranks, {stats.num_step_rows:,} step rows, "
        f"{stats.num_bytes / 2**20:,.0f} MiB in {gen_s:.1f} s (not timed below)"
    )

    # what a user's `ddlbench report` pays, imports included
    wall0, cpu0 = time.perf_counter(), time.process_time()
    from analysis.report import build_report

    import_s = time.perf_counter() - wall0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the campaign holds a corrupt line on purpose
        timings = build_report(
            base / "runs", base / "report", reference="aach2023", formats=tuple(args.formats.split(",")), jobs=args.jobs
        )
    jobs_used = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    rows = timings["num_step_rows"]
    load1 = os.getloadavg()[0]
    print()
    print(f"{'stage':<36}{'seconds':>10}")
    for name, value in [
        ("imports", import_s),
        ("ingest (load_campaign)", timings["load_s"]),
        ("metrics", timings["metrics_s"]),
        (f"figures, draw + save ({args.formats})", timings["figures_s"]),
        ("markdown + html", timings["write_s"]),
    ]:
        print(f"{name:<36}{value:>10.2f}")
    print()
    print(f"{'':<28}{'measured':>12}{'target':>10}")
    print(f"{'total wall time (s)':<28}{wall_s:>12.2f}{TARGET_S:>10.1f}   {'OK' if wall_s <= TARGET_S else 'OVER'}")
    cpu_all = cpu_s + (timings["figures_cpu_s"] if jobs_used > 1 else 0.0)
    print(f"{'total CPU time (s)':<28}{cpu_all:>12.2f}   (all processes; wall ~ CPU / cores when the machine is idle)")
    print(f"{'ingest rate (rows/s)':<28}{rows / timings['load_s']:>12,.0f}")
    print(f"{'end-to-end rate (rows/s)':<28}{rows / wall_s:>12,.0f}{rows / TARGET_S:>10,.0f}")
    print(f"{'figures written':<28}{timings['num_figures']:>12}")
    print(f"load average (1 min) {load1:.1f} on {os.cpu_count()} CPUs; report in {base / 'report'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
