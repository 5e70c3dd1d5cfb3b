"""Helpers for tests on the real local Slurm cluster: is it up, submit, poll."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN_SH = REPO / "slurm" / "run.sh"
TERMINAL = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


def slurm_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "sbatch not found: Slurm is not installed; run 'make slurm-up' (slurm/local_cluster.sh up)"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if "is UP" not in ping.stdout:
        return "no Slurm controller answers 'scontrol ping'; run 'make slurm-up' (slurm/local_cluster.sh up)"
    nodes = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30).stdout.split()
    if not any(state.rstrip("*~#$@") in ("idle", "mixed", "allocated") for state in nodes):
        return f"no usable Slurm node (sinfo states: {' '.join(nodes) or 'none'}); run 'make slurm-down slurm-up'"
    return None


def job_info(job_id: str) -> dict[str, str]:
    """`scontrol show job -o` as a dict (sbatch --wait polls too slowly: 10 s, then 32 s)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30).stdout
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


def wait_for(job_id: str, *, timeout_s: float = 240) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info = job_info(job_id)
        if info.get("JobState") in TERMINAL:
            return info
        time.sleep(0.5)
    subprocess.run(["scancel", job_id])
    raise AssertionError(f"job {job_id} did not finish within {timeout_s} s: {job_info(job_id)}")


def sbatch(*args: str, cwd: Path, flags: tuple[str, ...] = ()) -> str:
    """Submit slurm/run.sh with overrides the way a user does; the job id."""
    argv = ["sbatch", "--parsable", f"--chdir={cwd}", f"--output={cwd}/slurm-%j.out", *flags, str(RUN_SH), *args]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env={**os.environ, "DDLBENCH_PYTHON": sys.executable}
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]
