"""What starting the launcher as a fork of `ddlbench run` saves (launchers/supervise.py, Launcher.forks): the
same small local run (simple_cnn, synthetic data, 3 steps) started both ways, alternating, each in a fresh
`ddlbench run` process as a user starts it; wall and CPU time (children included) and the ratio.

    python perf/launch_fork.py [--rounds 3] [--ranks 2] [OVERRIDE ...]   e.g. framework=deepspeed framework.local_launcher=deepspeed

Not a test: it prints the measured figures side by side (the machine is shared; the load average is
printed beside each row).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# `ddlbench run` with every launcher's fork switched on or off for this process only
CHILD = r"""
import sys
from benchmarks import launch
for launcher in launch.LAUNCHERS.values():
    type(launcher).forks = type(launcher).forks and sys.argv[1] == "fork"
from ddlbench.cli import main
sys.exit(main(sys.argv[2:]))
"""


def one_run(mode: str, root: str, campaign: str, ranks: int, overrides: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the process and its children) of one `ddlbench run`."""
    argv = [
        "run",
        "model=simple_cnn",
        "loader=synthetic",
        "run.per_gpu_batch=8",
        "run.steps=3",
        "run.warmup_steps=1",
        "run.log_every=0",
        f"system.ranks_per_node={ranks}",
        f"run.root={root}",
        f"run.campaign={campaign}",
        *overrides,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, mode, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{mode} run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each mode, alternating (default 3)")
    parser.add_argument("--ranks", type=int, default=2, help="local ranks of each run (default 2)")
    parser.add_argument("overrides", nargs="*", help="more overrides of each run (default: DDP under torchrun)")
    args = parser.parse_args()
    times: dict[str, list[tuple[float, float]]] = {"exec": [], "fork": []}
    with tempfile.TemporaryDirectory() as root:
        for k in range(args.rounds):
            for mode in ("exec", "fork"):
                wall, cpu = one_run(mode, root, f"{mode}{k}", args.ranks, args.overrides)
                times[mode].append((wall, cpu))
                load = os.getloadavg()[0]
                print(f"round {k} {mode:4}: {wall:6.2f} s wall, {cpu:6.2f} s CPU (load {load:.2f})", flush=True)
    med = {m: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for m, t in times.items()}
    print(
        f"\nmedian of {args.rounds}, {' '.join(args.overrides) or 'framework=ddp'}, {args.ranks} rank(s) of simple_cnn, 3 steps:"
    )
    for mode, (wall, cpu) in med.items():
        how = "as a fork of the CLI" if mode == "fork" else "as a fresh process "
        print(f"  the launcher {how}: {wall:6.2f} s wall, {cpu:6.2f} s CPU")
    print(f"  fork / exec: wall {med['fork'][0] / med['exec'][0]:.3f}, CPU {med['fork'][1] / med['exec'][1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
