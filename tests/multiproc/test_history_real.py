"""ddlbench history on runs made here: one CPU cell (simple_cnn, 1 rank) in three campaigns of two repeats, the
third beside a CPU hog (three busy loops pinned to the one CPU the runs are pinned to) -> one change, at the third.
The fast tier checks the same on tests/data/history, runs made this way once."""

from __future__ import annotations

import os
import subprocess
import sys

from analysis.history.index import index_roots
from analysis.history.store import read_store
from analysis.history.trend import CHANGE, FIRST, NONE, change_points

CELL = (
    "model=simple_cnn",
    "loader=synthetic",
    "system.ranks_per_node=1",
    "run.per_gpu_batch=64",
    "run.warmup_steps=5",
    "run.steps=40",
    "run.log_every=0",
)


def test_a_cpu_hog_is_one_change_at_its_campaign(ddlbench, tmp_path):
    """Six real runs (a torchrun and a rank each): 25 s on the 2-core machine, so multiproc, not slow."""
    root = tmp_path / "runs"

    def campaign(name: str) -> None:
        for repeat in (0, 1):
            result = ddlbench("run", *CELL, f"run.root={root}", f"run.campaign={name}", f"run.repeat={repeat}")
            assert result.returncode == 0, result.stderr[-2000:]

    # every run on one CPU (its processes inherit this process's affinity), and three busy loops on that CPU
    # beside the third campaign's: its rank gets about a quarter of the CPU, a change far beyond what the other
    # tests of a loaded machine (xdist's other worker) make of the first two campaigns' repeats
    mine = os.sched_getaffinity(0)
    cpu = min(mine)
    os.sched_setaffinity(0, {cpu})
    try:
        campaign("a")
        campaign("b")
        hogs = [
            subprocess.Popen(
                [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}}); exec('while 1: pass')"]
            )
            for _ in range(3)
        ]
        try:
            campaign("c")
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    finally:
        os.sched_setaffinity(0, mine)
    index_roots([root], root / "history.sqlite")
    assert index_roots([root], root / "history.sqlite").num_added == 0
    changes = change_points(read_store(root / "history.sqlite"))
    assert list(zip(changes["campaign"], changes["verdict"])) == [("a", FIRST), ("b", NONE), ("c", CHANGE)], changes[
        ["campaign", "mean", "std", "change_pct", "threshold_pct"]
    ].to_string()
    result = ddlbench("history", str(root), "--check")
    assert result.returncode == 1 and "campaign c" in result.stderr
