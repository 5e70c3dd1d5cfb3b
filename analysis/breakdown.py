"""Where the time goes, from two sources that must agree: the always-on phase timers (rank<R>.jsonl)
and a profiler-trace window classified by kernel (the sampled window's breakdown_rank<R>.json, or a
kept trace/rank<R>.pt.trace.json.gz reduced here the same way: benchmarks/tracereduce.py).

Timer breakdown of the same steps: data = data_s, comm_exposed = comm_exposed_s,
compute = fwd_s + bwd_s + opt_s - comm_exposed_s, other = step_s - the phases; comm_total = comm_s.
Agreement pairs: compute <-> compute + memcpy, comm_exposed <-> comm_exposed, data + other <-> idle,
comm_total <-> comm_total; the largest difference, in percentage points, is the disagreement.

Why by hand and not Holistic Trace Analysis (HTA, analysis/breakdown_hta.py runs it where it is
installed, as a cross-check): HTA is built around GPU kernels; on our CPU/gloo traces its temporal
breakdown and idle-time breakdown raise, comm/comp overlap is NaN and the kernel breakdown is empty
(checked with holistictraceanalysis 0.5.0 and torch 2.14, see docs/breakdown.md), so the CPU tests
could not check anything through it. It also has no notion of our phase timers, and it pulls ~90
packages (jupyterlab, plotly). The interval arithmetic (benchmarks/tracereduce.py) is ~100 lines, works
on CPU and GPU traces, and on GPU traces is the same reduction as HTA's comm/comp overlap.

Pure functions (dicts/lists in, dataclasses out) plus two readers; no plotting.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

# the trace reduction is the run's record format too (breakdown_rank<R>.json): it lives below both
from benchmarks.tracereduce import TraceBreakdown, breakdown_path, read_trace, trace_breakdown

# --- the phase timers --------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TimerBreakdown:
    """Sums over the chosen steps (seconds), and shares of step_s (data + compute + comm_exposed + other = 1)."""

    step_s: float
    data_s: float
    compute_s: float
    comm_total_s: float | None  # None: the framework does not time its collectives
    comm_exposed_s: float
    other_s: float
    steps: list[int]

    def shares(self) -> dict[str, float]:
        w = self.step_s or float("nan")
        return {
            "data": self.data_s / w,
            "compute": self.compute_s / w,
            "comm_exposed": self.comm_exposed_s / w,
            "other": self.other_s / w,
            "comm_total": float("nan") if self.comm_total_s is None else self.comm_total_s / w,
        }


def timer_breakdown(records: Iterable[dict], *, steps: Sequence[int] | None = None) -> TimerBreakdown:
    """Step records (rank<R>.jsonl lines) -> the breakdown over `steps` (default: the measured ones)."""
    wanted = None if steps is None else set(steps)
    rows = [
        r
        for r in records
        if "step_s" in r and (r["step"] in wanted if wanted is not None else not r.get("warmup", False))
    ]
    if not rows:
        raise ValueError(f"no step record for steps {sorted(wanted) if wanted else 'measured'}")
    total = lambda key: sum(float(r.get(key) or 0.0) for r in rows)  # noqa: E731
    phases = total("fwd_s") + total("bwd_s") + total("opt_s")
    exposed = total("comm_exposed_s")
    has_comm = any(r.get("comm_s") is not None for r in rows)
    return TimerBreakdown(
        step_s=total("step_s"),
        data_s=total("data_s"),
        compute_s=phases - exposed,
        comm_total_s=total("comm_s") if has_comm else None,
        comm_exposed_s=exposed,
        other_s=total("step_s") - total("data_s") - phases,
        steps=sorted(r["step"] for r in rows),
    )


def read_step_records(path: Path) -> list[dict]:
    """The step lines of a rank<R>.jsonl (the header and other kinds left out)."""
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if "step" in r and "kind" not in r]


# --- agreement ---------------------------------------------------------------------------------


def compare(timer: TimerBreakdown, trace: TraceBreakdown) -> dict[str, tuple[float, float]]:
    """Category -> (timer share, trace share), for the categories both sources measure."""
    t, g = timer.shares(), trace.shares()
    pairs = {
        "compute": (t["compute"], g["compute"] + g["memcpy"]),
        "comm_exposed": (t["comm_exposed"], g["comm_exposed"]),
        "data+other/idle": (t["data"] + t["other"], g["idle"]),
    }
    if timer.comm_total_s is not None:
        pairs["comm_total"] = (t["comm_total"], g["comm_total"])
    return pairs


def disagreement_pp(pairs: dict[str, tuple[float, float]]) -> float:
    """The largest |timer - trace| over the categories, in percentage points."""
    return max(abs(a - b) for a, b in pairs.values()) * 100


def rank_trace_breakdown(run_dir: Path, rank: int = 0) -> TraceBreakdown:
    """One rank's trace breakdown: its breakdown_rank<R>.json (reduced on the rank), else its raw trace."""
    reduced = breakdown_path(run_dir, rank)
    if reduced.is_file():
        return TraceBreakdown(**json.loads(reduced.read_text())["trace"])
    return trace_breakdown(read_trace(Path(run_dir) / "trace" / f"rank{rank}.pt.trace.json.gz"))


def run_breakdown(
    run_dir: Path, rank: int = 0
) -> tuple[TimerBreakdown, TraceBreakdown, dict[str, tuple[float, float]]]:
    """Timer and trace breakdown of one rank of a run with a profiler window, over the profiled steps."""
    run_dir = Path(run_dir)
    trace = rank_trace_breakdown(run_dir, rank)
    timer = timer_breakdown(read_step_records(run_dir / f"rank{rank}.jsonl"), steps=trace.steps)
    return timer, trace, compare(timer, trace)


def format_side_by_side(timer: TimerBreakdown, trace: TraceBreakdown, pairs: dict[str, tuple[float, float]]) -> str:
    lines = [
        f"steps {trace.steps[0]}..{trace.steps[-1]}: timers {timer.step_s * 1e3:.1f} ms, trace window {trace.window_s * 1e3:.1f} ms",
        f"{'category':<18}{'timers':>9}{'trace':>9}{'diff pp':>9}",
    ]
    for name, (a, b) in pairs.items():
        lines.append(f"{name:<18}{a:>9.1%}{b:>9.1%}{(a - b) * 100:>+9.1f}")
    lines.append(f"agreement: max |diff| = {disagreement_pp(pairs):.1f} pp (goal <= 5)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="timer vs trace breakdown of a run with run.profile_steps")
    parser.add_argument("run_dir")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    timer, trace, pairs = run_breakdown(Path(args.run_dir), args.rank)
    if args.json:
        print(
            json.dumps(
                {
                    "timer": asdict(timer),
                    "trace": asdict(trace),
                    "pairs": pairs,
                    "disagreement_pp": disagreement_pp(pairs),
                }
            )
        )
    else:
        print(format_side_by_side(timer, trace, pairs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
