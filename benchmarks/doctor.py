"""`ddlbench doctor`: what this machine can run, and the command that fixes what it cannot."""
from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _torch() -> Check:
    import torch

    gpus = torch.cuda.device_count()
    return Check("torch", True, f"{torch.__version__}, CUDA {torch.version.cuda}, {gpus} GPU(s) visible")


def _horovod() -> Check:
    from benchmarks.errors import ConfigError
    from benchmarks.frameworks.horovod import build_info

    try:
        info = build_info()
    except ConfigError as error:
        return Check("horovod", False, str(error).split(";")[0], "make horovod")
    built = ", ".join(f"{op} {'yes' if info[op] else 'no'}" for op in ("gloo", "mpi", "nccl"))
    # Gloo is what horovodrun --gloo needs; a build without it (or without MPI for mpirun/srun) is a finding
    ok = info["gloo"] or info["mpi"]
    return Check("horovod", bool(ok), f"{info['version']}: {built}", "" if ok else "make horovod")


def _module(name: str, label: str, fix: str) -> Callable[[], Check]:
    def check() -> Check:
        if importlib.util.find_spec(name) is None:
            return Check(label, False, "not installed", fix)
        from importlib import metadata

        try:
            version = metadata.version(label)
        except metadata.PackageNotFoundError:
            version = "installed"
        return Check(label, True, version)

    return check


def _program(name: str, fix: str) -> Callable[[], Check]:
    def check() -> Check:
        path = shutil.which(name)
        return Check(name, path is not None, path or "not on PATH", "" if path else fix)

    return check


# adapters add their own deeper checks here (e.g. what horovod was built with)
CHECKS: list[Callable[[], Check]] = [
    _torch,
    _module("hydra", "hydra-core", "pip install -e ."),
    _module("deepspeed", "deepspeed", "pip install -e '.[deepspeed]'"),
    _horovod,
    _module("nvidia.dali", "nvidia-dali-cuda130", "pip install -e '.[dali-cuda130]' (or '.[dali]' on CUDA 12)"),
    _program("mpirun", "apt-get install openmpi-bin libopenmpi-dev"),
    _program("srun", "slurm/local_cluster.sh up (a local test cluster) or load your site's Slurm module"),
]


def run_checks() -> list[Check]:
    results = []
    for check in CHECKS:
        try:
            results.append(check())
        except Exception as error:  # a broken install is a finding, not a crash of the doctor
            results.append(Check(getattr(check, "__name__", "check"), False, f"{type(error).__name__}: {error}"))
    return results


def format_checks(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else "MISS"
        lines.append(f"{mark} {c.name:<22} {c.detail}" + (f"   -> fix: {c.fix}" if c.fix else ""))
    return "\n".join(lines)
