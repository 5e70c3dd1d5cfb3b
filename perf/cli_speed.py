"""How soon `ddlbench` answers a user who is typing (issue 36): --help, --version and a mistyped run, each
in a fresh process, beside `import torch` for scale.

Not a test: it prints the median wall time of each command next to its goal. Wall time depends on what
else runs on the machine, so the load average before and after is printed as well.

    python perf/cli_speed.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# (what a user types, goal in seconds; None: for scale)
CASES = [
    (["--help"], 1.0),
    (["--version"], 1.0),
    (["run", "framework=mxnet"], 1.5),
    (["run", "run.stepz=3"], 1.5),
]


def ddlbench() -> list[str]:
    """The installed `ddlbench` script beside this Python, as a user starts it; else `python -m ddlbench`."""
    script = Path(sys.executable).with_name("ddlbench")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ddlbench"]


def wall_s(argv: list[str], *, repeats: int) -> tuple[float, int]:
    """Median wall seconds of `repeats` fresh processes, and the exit code of the last."""
    times, code = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        code = subprocess.run(argv, capture_output=True, cwd=Path(__file__).resolve().parent.parent).returncode
        times.append(time.perf_counter() - start)
    return statistics.median(times), code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per command (default 5)")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    rows = [
        (" ".join(["ddlbench", *case]), *wall_s([*ddlbench(), *case], repeats=args.repeats), goal)
        for case, goal in CASES
    ]
    rows.append(
        ("python -c 'import torch'", *wall_s([sys.executable, "-c", "import torch"], repeats=args.repeats), None)
    )
    load_after = os.getloadavg()[0]

    width = max(len(r[0]) for r in rows)
    print(f"{'command':<{width}}  {'wall s':>7}  {'goal s':>7}  {'exit':>4}  met")
    for command, seconds, code, goal in rows:
        met = "-" if goal is None else ("yes" if seconds <= goal else "NO")
        shown_goal = "-" if goal is None else f"{goal:.1f}"
        print(f"{command:<{width}}  {seconds:7.2f}  {shown_goal:>7}  {code:>4}  {met}")
    print(
        f"\nmedian of {args.repeats} fresh processes each; {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before, {load_after:.1f} after; ddlbench = {shlex.join(ddlbench())}"
        + ("" if shutil.which("ddlbench") else " (not on PATH)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
