"""CPU binding of a rank on its own node: system.cpu_bind for ranks that no srun has bound.

Under Slurm, srun binds each task (`srun --cpu-bind=<system.cpu_bind>`, launchers/slurm.py). torchrun,
horovodrun, mpirun (--bind-to none) and the deepspeed launcher bind nothing. There a rank binds itself
when system.cpu_bind=cores, before it starts any thread (DALI workers, NCCL, data-loader processes
inherit the binding).
"""
from __future__ import annotations

import os

from benchmarks.errors import ConfigError

LOCAL_MODES = (None, "cores")


def check_local(cpu_bind: str | None) -> None:
    """The values a local launch understands; the others are srun's own (map_ldom:..., sockets, ...)."""
    if cpu_bind not in LOCAL_MODES:
        raise ConfigError(f"system.cpu_bind={cpu_bind!r} is a srun binding and this run is local; "
                          "use system.cpu_bind=cores (each local rank takes its share of the cores) or null")


def cores_for(local_rank: int, local_world_size: int, allowed: list[int]) -> list[int]:
    """Rank `local_rank`'s share of `allowed`: its block of equal contiguous blocks, in CPU order. The
    remainder goes to the first ranks; with fewer CPUs than ranks, ranks share one CPU each."""
    cpus = sorted(allowed)
    if len(cpus) < local_world_size:
        return [cpus[local_rank % len(cpus)]]
    size, extra = divmod(len(cpus), local_world_size)
    start = local_rank * size + min(local_rank, extra)
    return cpus[start:start + size + (local_rank < extra)]


def bind(cpu_bind: str | None, *, local_rank: int, local_world_size: int, launched_by: str) -> list[int] | None:
    """Binds this process as system.cpu_bind asks, unless srun did; returns the CPUs it may run on
    (None where the OS cannot say)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    if cpu_bind == "cores" and launched_by != "slurm":
        os.sched_setaffinity(0, cores_for(local_rank, local_world_size, list(os.sched_getaffinity(0))))
    return sorted(os.sched_getaffinity(0))


def compact(cpus: list[int] | None) -> str | None:
    """[0, 1, 2, 3, 8, 9] -> '0-3,8-9' (the taskset/Slurm notation, for logs)."""
    if cpus is None:
        return None
    ranges: list[list[int]] = []
    for cpu in sorted(cpus):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)
