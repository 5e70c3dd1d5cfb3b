"""What starting processes as forks saves (launchers/lifecycle/forked_rank.py): the same small local CPU run (simple_cnn,
synthetic data, 3 steps) started three ways, alternating, each in a fresh `ddlbench run` process as a user
starts it: `exec` (the launcher and its ranks fresh Pythons), `agent` (the launcher a fork of `ddlbench run`,
Launcher.forks; its ranks fresh), `ranks` (the ranks forks of that launcher too, JobShape.fork_ranks); wall
and CPU time (children included) and the ratios to `exec`.

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

MODES = ("exec", "agent", "ranks")
# `ddlbench run` with the launcher's fork (agent, ranks) and the ranks' fork (ranks) switched on or off for
# this process only
CHILD = r"""
import sys
import launchers.local
from launchers import programs
mode = sys.argv[1]
for launcher in programs.LAUNCHERS.values():
    type(launcher).forks = type(launcher).forks and mode != "exec"
command = launchers.local.local_command
launchers.local.local_command = lambda **kw: command(**{**kw, "fork_ranks": kw["fork_ranks"] and mode == "ranks"})
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
    times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as root:
        for k in range(args.rounds):
            for mode in MODES:
                wall, cpu = one_run(mode, root, f"{mode}{k}", args.ranks, args.overrides)
                times[mode].append((wall, cpu))
                load = os.getloadavg()[0]
                print(f"round {k} {mode:4}: {wall:6.2f} s wall, {cpu:6.2f} s CPU (load {load:.2f})", flush=True)
    med = {m: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for m, t in times.items()}
    print(
        f"\nmedian of {args.rounds}, {' '.join(args.overrides) or 'framework=ddp'}, {args.ranks} rank(s) of simple_cnn, 3 steps:"
    )
    how = {
        "exec": "launcher and ranks fresh      ",
        "agent": "launcher forked, ranks fresh  ",
        "ranks": "launcher and ranks forked     ",
    }
    for mode, (wall, cpu) in med.items():
        ratio = f"   / exec: wall {wall / med['exec'][0]:.3f}, CPU {cpu / med['exec'][1]:.3f}" if mode != "exec" else ""
        print(f"  {how[mode]}: {wall:6.2f} s wall, {cpu:6.2f} s CPU{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
