"""A run that trains until it is stopped, for the tests that stop it (a signal, a killed or stopped rank, a
full disk): `ddlbench run` in a process of its own, and the wait for its first steps."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

LONG = ["model=simple_cnn", "run.steps=1000000", "run.warmup_steps=1", "run.per_gpu_batch=2", "run.log_every=0"]


def start(root: Path, *overrides: str) -> subprocess.Popen:
    """`ddlbench run` of LONG into run.root=root, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "ddlbench.cli", "run", *LONG, f"run.root={root}", *overrides],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_steps(root: Path, *, ranks: int = 2, timeout_s: float = 120) -> Path:
    """The run directory once every rank has logged a step."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for run_dir in (root / "default").glob("*-r0"):
            logs = [run_dir / f"rank{r}.jsonl" for r in range(ranks)]
            if all(p.exists() and '"step_s"' in p.read_text() for p in logs):
                return run_dir
        time.sleep(0.2)
    raise AssertionError(f"no steps in {root} after {timeout_s} s")
