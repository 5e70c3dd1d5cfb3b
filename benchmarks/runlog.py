"""Writing a run directory: rank<R>.jsonl and meta.json's provenance (names, formats and state: rundir.py).

Nothing here ever overwrites: per-rank logs are opened with exclusive create, and a run directory
that already holds a run is refused before anything starts.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from benchmarks import affinity
from benchmarks.rundir import run_files
from benchmarks.rundir.run_files import STEP_FIELDS

if TYPE_CHECKING:
    import torch

    from benchmarks.distenv import DistEnv

PROVENANCE_ENV_PREFIXES = (
    "NCCL_",
    "HOROVOD_",
    "SLURM_",
    "OMP_",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "DS_",
)


class RankLog:
    """rank<R>.jsonl: a header line, then one line per step, flushed per line (a crash keeps them)."""

    def __init__(self, run_dir: Path, rank: int) -> None:
        self.path = run_dir / f"rank{rank}.jsonl"
        self._file: TextIO = open(self.path, "x")  # exclusive: never overwrite another run's log
        self._failed = False

    def write(self, record: dict[str, Any]) -> None:
        """One line; a step record holds only run_files.STEP_FIELDS (the header has kind=header). A write that
        fails (a full disk, a file system gone) raises OSError naming this log's path."""
        assert record.get("kind") == "header" or record.keys() <= STEP_FIELDS.keys(), set(record) - set(STEP_FIELDS)
        try:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()
        except OSError as error:
            self._failed = True
            raise OSError(error.errno, error.strerror, str(self.path)) from None

    def close(self) -> None:
        """Close (a second close does nothing); after a failed write, the lines still buffered are dropped
        without a second error: the run stops for the first."""
        try:
            self._file.close()
        except OSError:
            if not self._failed:
                raise


def _command(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def git_provenance(repo_dir: Path) -> dict[str, Any]:
    sha = _command(["git", "-C", str(repo_dir), "rev-parse", "HEAD"])
    status = _command(["git", "-C", str(repo_dir), "status", "--porcelain", "--untracked-files=no"])
    return {"git_sha": sha, "git_dirty": bool(status) if status is not None else None}


# the folder this rank imported its engine from: the checkout (or site-packages) whose code ran
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def code_provenance() -> dict[str, Any]:
    """The code this process runs: `package` (the folder `benchmarks` was imported from), its `git_sha` and
    `git_dirty` (None outside a git checkout). Each rank's header holds its own; meta.json rank 0's."""
    return {"package": str(PACKAGE_DIR), **git_provenance(PACKAGE_DIR)}


def code_fingerprint(code: dict[str, Any]) -> float:
    """A number that differs between two ranks' code_provenance (48 bits of its hash: exact in a float64), for a
    min/max all-reduce that tells whether every rank ran the same code."""
    digest = hashlib.sha256(json.dumps(code, sort_keys=True).encode()).hexdigest()
    return float(int(digest[:12], 16))


def package_versions() -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for dist in (
        "torch",
        "torchvision",
        "hydra-core",
        "horovod",
        "deepspeed",
        "nvidia-dali-cuda120",
        "nvidia-dali-cuda130",
        "numpy",
    ):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


# CPU flags that change how bfloat16 is computed (oneDNN's AMX and AVX-512 kernels against AVX2's: docs/testing.md)
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def _cpuinfo_first(field: str) -> str | None:
    """The first value of a /proc/cpuinfo field (Linux), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.split(":", 1)[0].strip() == field:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str | None:
    """The CPU's model name as the kernel reports it (/proc/cpuinfo; platform.processor() elsewhere)."""
    return _cpuinfo_first("model name") or platform.processor() or None


def cpu_bf16_flags() -> list[str] | None:
    """Which of BF16_FLAGS the CPU has ([] none; None where /proc/cpuinfo is not there to say)."""
    flags = _cpuinfo_first("flags")
    return None if flags is None else [f for f in BF16_FLAGS if f in flags.split()]


def hardware_provenance() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "cpu_bf16_flags": cpu_bf16_flags(),
        "cuda": torch.version.cuda,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available()
        else [],
    }
    if torch.cuda.is_available():
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        # the driver: what a centre upgrades most often (ddlbench history names it across a change)
        driver = _command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        info["driver"] = driver.splitlines()[0].strip() if driver else None
        info["nvidia_smi_topo"] = _command(["nvidia-smi", "topo", "-m"])
    return info


def environment_provenance() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(PROVENANCE_ENV_PREFIXES)}


# the image the ranks run in, as the launching host saw it (launchers/container.py: runtime, its version, image,
# digest), handed to the ranks as JSON in this variable: inside the container the runtime is not visible
CONTAINER_ENV = "DDLBENCH_CONTAINER"


def container_provenance() -> dict[str, Any]:
    """meta.json's `container`: what the launcher recorded of the image; {} for a run outside a container."""
    try:
        record = json.loads(os.environ.get(CONTAINER_ENV) or "{}")
    except ValueError:
        return {}
    return {"container": record} if isinstance(record, dict) and record else {}


def header(env: DistEnv, device: torch.device, *, cpus: list[int], steps_per_epoch: int, code: dict[str, Any]) -> dict:
    """The rank log's first line: where this rank ran, and which code (code_provenance)."""
    return {
        "kind": "header",
        "schema_version": run_files.SCHEMA_VERSION,
        "rank": env.rank,
        "local_rank": env.local_rank,
        "host": socket.gethostname(),
        # the launcher's node of this rank (its ranks are numbered node by node): tells hosts apart that share a
        # host name (containers, network namespaces)
        "node": env.rank // max(1, env.local_world_size),
        "device": str(device),
        "pid": os.getpid(),
        "cpus": affinity.compact(cpus),
        "steps_per_epoch": steps_per_epoch,
        "code": code,
    }
