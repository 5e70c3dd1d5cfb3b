"""What the Slurm scheduler says about jobs: one function per query (squeue, scontrol, sacct).

Knows nothing of campaigns or run directories: jobs are found by a job-name prefix
(launchers/submit.py names them).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from benchmarks.errors import ConfigError

# a job in one of these is still the scheduler's: its cell must not be submitted again
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"})
# waiting for resources; every other active state holds nodes
PENDING_STATES = frozenset({"PENDING"})


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedJob:
    job_id: str  # <job id>, or <array id>_<task> for a task of an array
    state: str  # one of ACTIVE_STATES

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES


def available() -> bool:
    """Whether this machine can ask Slurm (squeue on the PATH): off a cluster, states come from the run
    directories alone."""
    import shutil

    return shutil.which("squeue") is not None


def active_jobs(name_prefix: str) -> dict[str, QueuedJob]:
    """{job name, or array task id: job} of my queued or running jobs whose name starts with name_prefix
    (squeue; -r lists every array task on its own line, as <array id>_<k>)."""
    try:
        out = subprocess.run(
            ["squeue", "--me", "-r", "-h", "-o", "%i|%j|%T"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except FileNotFoundError:
        raise ConfigError(
            "squeue not found: this machine is not a Slurm submit host; "
            "run on the login node or bring up the local cluster with 'make slurm-up'"
        ) from None
    except subprocess.SubprocessError as error:
        raise ConfigError(
            f"squeue failed ({str(getattr(error, 'stderr', '') or error).strip()}); is Slurm up? "
            "('make slurm-up' for the local cluster)"
        ) from None
    jobs: dict[str, QueuedJob] = {}
    for line in out.splitlines():
        job_id, name, state = line.split("|", 2)
        if name.startswith(name_prefix) and state in ACTIVE_STATES:
            key = job_id if "_" in job_id else name  # the tasks of an array share its name
            jobs[key] = QueuedJob(job_id=job_id, state=state)
    return jobs


def _query(argv: list[str]) -> str:
    """The command's stdout; empty when it is missing or fails (the state is then unknown, not an error)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=15).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def scontrol_state(job_id: str) -> str | None:
    """JobState of a job the controller still remembers (recent jobs)."""
    for item in _query(["scontrol", "show", "job", "-o", job_id]).split():
        if item.startswith("JobState="):
            return item.split("=", 1)[1]
    return None


def sacct_state(job_id: str) -> str | None:
    """State from the accounting database, where the site keeps one."""
    out = _query(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"])
    return out.splitlines()[0].split()[0] if out else None


def final_state(job_id: str) -> str | None:
    """A finished job's final state (COMPLETED, FAILED, TIMEOUT, ...), or None where nobody remembers it."""
    return scontrol_state(job_id) or sacct_state(job_id)


def partition_nodes(partition: str | None) -> list[str] | None:
    """The node names of a partition (the default one where None), as sinfo lists them; None where Slurm
    does not answer (off a cluster)."""
    out = _query(["sinfo", "-h", "-N", "-o", "%N", *(["-p", partition] if partition else [])])
    return sorted(set(out.split())) or None
