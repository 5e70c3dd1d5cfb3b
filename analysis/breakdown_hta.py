"""Cross-check of analysis/breakdown.py with Holistic Trace Analysis where HTA is installed
(`pip install holistictraceanalysis`, or the `hta` extra) and the trace has GPU kernels.

HTA is imported only here. It is a cross-check, not the source of the breakdown: on CPU/gloo
traces it has nothing to offer (temporal and idle breakdowns raise, comm/comp overlap is NaN),
see analysis/breakdown.py. Run: python -m analysis.breakdown_hta <run dir> [--rank R]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from benchmarks.tracereduce import read_trace, trace_breakdown


def hta_overlap_pct(trace_file: Path, rank: int) -> dict[str, float]:
    """HTA's comm/comp overlap % and temporal breakdown shares for one rank's trace file."""
    from hta.trace_analysis import TraceAnalysis  # the only import of hta in ddlbench

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # trace_files: HTA otherwise guesses ranks from every json in the folder
        analysis = TraceAnalysis(trace_dir=str(trace_file.parent), trace_files={rank: str(trace_file)})
        overlap = analysis.get_comm_comp_overlap(visualize=False)
        temporal = analysis.get_temporal_breakdown(visualize=False)
    row = temporal.iloc[0]
    return {
        "comp_comm_overlap_pct": float(overlap["comp_comm_overlap_pctg"].iloc[0]),
        "idle_pct": float(row.get("idle_time_pctg", float("nan"))),
        "compute_pct": float(row.get("compute_time_pctg", float("nan"))),
        "non_compute_pct": float(row.get("non_compute_time_pctg", float("nan"))),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--rank", type=int, default=0)
    args = parser.parse_args(argv)
    trace_file = Path(args.run_dir) / "trace" / f"rank{args.rank}.pt.trace.json.gz"
    try:
        hta = hta_overlap_pct(trace_file, args.rank)
    except ImportError:
        print("HTA cross-check skipped: holistictraceanalysis is not installed (pip install holistictraceanalysis)")
        return 0
    ours = trace_breakdown(read_trace(trace_file))
    # HTA drops the last profiler step and counts over all steps; ours covers every ProfilerStep window
    ours_overlap = 100 * ours.comm_overlap_s / ours.comm_total_s if ours.comm_total_s else float("nan")
    print(f"comm/comp overlap: HTA {hta['comp_comm_overlap_pct']:.1f}% | ours {ours_overlap:.1f}%")
    print(
        f"HTA temporal: compute {hta['compute_pct']:.1f}% non-compute {hta['non_compute_pct']:.1f}% "
        f"idle {hta['idle_pct']:.1f}% | ours compute {100 * ours.shares()['compute']:.1f}% "
        f"idle {100 * ours.shares()['idle']:.1f}%"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
