"""The run directory: config.yaml, meta.json, rank<R>.jsonl, and an atomic summary.json.

A directory without summary.json is an incomplete run and is never counted. Nothing here ever
overwrites: per-rank logs are opened with exclusive create, and a run directory that already holds
a run is refused before anything starts.
"""
from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, TextIO

SCHEMA_VERSION = 1
SUMMARY = "summary.json"
PROVENANCE_ENV_PREFIXES = ("NCCL_", "HOROVOD_", "SLURM_", "OMP_", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS",
                           "DS_")


def run_dir_name(*, framework: str, loader: str, model: str, world_size: int, num_nodes: int,
                 per_gpu_batch: int, repeat: int) -> str:
    return f"{framework}-{loader}-{model}-g{world_size}-n{num_nodes}-b{per_gpu_batch}-r{repeat}"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def holds_a_run(run_dir: Path) -> bool:
    return run_dir.is_dir() and any(
        p.name in (SUMMARY, "meta.json") or p.name.startswith("rank") for p in run_dir.iterdir()
    )


class RankLog:
    """rank<R>.jsonl: a header line, then one line per step, flushed per line (a crash keeps them)."""

    def __init__(self, run_dir: Path, rank: int) -> None:
        self.path = run_dir / f"rank{rank}.jsonl"
        self._file: TextIO = open(self.path, "x")  # exclusive: never overwrite another run's log

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _command(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def git_provenance(repo_dir: Path) -> dict[str, Any]:
    sha = _command(["git", "-C", str(repo_dir), "rev-parse", "HEAD"])
    status = _command(["git", "-C", str(repo_dir), "status", "--porcelain", "--untracked-files=no"])
    return {"git_sha": sha, "git_dirty": bool(status) if status is not None else None}


def package_versions() -> dict[str, str | None]:
    from importlib import metadata

    versions: dict[str, str | None] = {}
    for dist in ("torch", "torchvision", "hydra-core", "horovod", "deepspeed",
                 "nvidia-dali-cuda120", "nvidia-dali-cuda130", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def hardware_provenance() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cuda": torch.version.cuda,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        if torch.cuda.is_available() else [],
    }
    if torch.cuda.is_available():
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        info["nvidia_smi_topo"] = _command(["nvidia-smi", "topo", "-m"])
    return info


def environment_provenance() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(PROVENANCE_ENV_PREFIXES)}


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
