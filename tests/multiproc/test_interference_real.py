"""Interference measured for real on this host (launchers/lifecycle/interference.py): two runs at once are both
marked shared host (each sees the other's ranks), a run beside one busy loop per CPU is marked (the others' CPU
time), and a run alone is unmarked. "Alone" on a machine that runs other tests beside this one: the test measures
the host's other CPU time and other ddlbench ranks itself over the run (outside the run's accounting) and skips,
saying so, where the machine was not alone. NVML's half is tests/unit/test_interference.py, with a fake NVML."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from launchers.lifecycle.interference import SHARED_HOST, is_ddlbench_run

RUN = ["model=simple_cnn", "model.image_size=32", "model.num_classes=10", "run.per_gpu_batch=8",
       "run.warmup_steps=2", "system.ranks_per_node=1"]  # fmt: skip


def _start(root: Path, campaign: str, steps: int) -> subprocess.Popen:
    argv = [sys.executable, "-m", "ddlbench", "run", *RUN, f"run.steps={steps}", f"run.root={root}",
            f"run.campaign={campaign}"]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())


def _finish(process: subprocess.Popen, root: Path, campaign: str) -> dict:
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, out[-3000:]
    (summary,) = (root / campaign).glob("*/summary.json")
    return json.loads(summary.read_text())


def _verdicts(summary: dict) -> dict:
    (host,) = summary["interference"]["hosts"]
    return host["verdicts"]


# slow: a run of 12,000 steps beside one of 6,000 on the 2 cores (about 20 s alone, more on a loaded machine): a step of
# this model takes a millisecond, so shorter runs end before the other has started
@pytest.mark.slow
def test_two_runs_at_once_on_one_host_are_both_marked(tmp_path, rank_processes):
    # the second starts once the first trains, and the first trains for longer: each window holds the other's ranks
    # however long the second takes to start on a loaded machine
    first = _start(tmp_path, "one", 12000)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "one").glob("*/rank0.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.2)
    second = _start(tmp_path, "two", 6000)
    summaries = [_finish(first, tmp_path, "one"), _finish(second, tmp_path, "two")]
    for summary in summaries:
        assert "another ddlbench run" in _verdicts(summary)[SHARED_HOST]["detail"], summary["interference"]
        assert summary["interference_marks"].startswith(f"{SHARED_HOST}: ")


# slow: the run gets a third of the CPUs beside the busy loops (8 s on the idle 2-core machine, 58 s on a loaded one)
@pytest.mark.slow
def test_a_busy_loop_per_cpu_beside_a_run_marks_it(tmp_path, rank_processes):
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(psutil.cpu_count() or 1)]
    try:
        summary = _finish(_start(tmp_path, "hog", 300), tmp_path, "hog")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    detail = _verdicts(summary)[SHARED_HOST]["detail"]
    assert "other processes used" in detail, summary["interference"]


class _Background:
    """What the host did besides this test and its children, measured by the test: other processes' CPUs on
    average (the host's busy time less this process's and its waited children's) and other ddlbench ranks seen."""

    def __init__(self) -> None:
        self.ranks: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scan, daemon=True)

    def _scan(self) -> None:
        mine = {os.getpid()}
        while not self._stop.wait(0.5):
            with_children = mine | {p.pid for p in psutil.Process().children(recursive=True)}
            for process in psutil.process_iter(["pid", "cmdline"]):
                if process.info["pid"] not in with_children and is_ddlbench_run(process.info["cmdline"] or []):
                    self.ranks.add(process.info["pid"])

    def __enter__(self) -> _Background:
        self._t0, self._busy0, self._mine0 = time.time(), self._busy(), self._mine()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        span = time.time() - self._t0
        self.other_cpus = max(0.0, (self._busy() - self._busy0) - (self._mine() - self._mine0)) / span

    @staticmethod
    def _busy() -> float:
        t = psutil.cpu_times()
        return sum(t) - t.idle - t.iowait - t.guest - t.guest_nice - t.steal

    @staticmethod
    def _mine() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system


def test_a_run_alone_is_unmarked(tmp_path, rank_processes):
    with _Background() as background:
        summary = _finish(_start(tmp_path, "alone", 300), tmp_path, "alone")
    if background.ranks or background.other_cpus >= 0.3:
        pytest.skip(
            f"the machine was not alone: {background.other_cpus:.2f} CPUs of other processes, other ddlbench ranks "
            f"{sorted(background.ranks)} (the run's record: {summary['interference']})"
        )
    assert summary["interference_marks"] == "", summary["interference"]
    (host,) = summary["interference"]["hosts"]
    assert host["num_samples"] >= 2 and host["own_cpus"] > 0
