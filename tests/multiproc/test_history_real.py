"""ddlbench history on runs made here: one CPU cell (simple_cnn, 1 rank) in three campaigns of two repeats, the
third beside a CPU hog (busy loops pinned to the CPUs the rank runs on) -> one change, at the third.
The fast tier checks the same on tests/data/history, runs made this way once."""

from __future__ import annotations

import os
import subprocess
import sys

from analysis.history.store import index_roots, read_store
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

    campaign("a")
    campaign("b")
    cpus = sorted(os.sched_getaffinity(0))
    hogs = [
        subprocess.Popen(
            [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {cpus}); exec('while True: pass')"]
        )
        for _ in cpus
    ]
    try:
        campaign("c")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    index_roots([root], root / "history.sqlite")
    assert index_roots([root], root / "history.sqlite").num_added == 0
    changes = change_points(read_store(root / "history.sqlite"))
    assert list(zip(changes["campaign"], changes["verdict"])) == [("a", FIRST), ("b", NONE), ("c", CHANGE)], changes[
        ["campaign", "mean", "std", "change_pct", "threshold_pct"]
    ].to_string()
    result = ddlbench("history", str(root), "--check")
    assert result.returncode == 1 and "campaign c" in result.stderr
