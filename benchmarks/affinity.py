"""CPU binding of a rank on its own node: system.cpu_bind for ranks that no srun has bound.

Under Slurm, srun binds each task (`srun --cpu-bind=<system.cpu_bind>`, launchers/slurm.py). torchrun,
horovodrun, mpirun (--bind-to none) and the deepspeed launcher bind nothing. There a rank binds itself
when system.cpu_bind=cores, before it starts any thread (DALI workers, NCCL, data-loader processes
inherit the binding).
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.errors import ConfigError

LOCAL_MODES = (None, "cores")
SYSFS_CPUS = Path("/sys/devices/system/cpu")


def check_local(cpu_bind: str | None) -> None:
    """The values a local launch understands; the others are srun's own (map_ldom:..., sockets, ...)."""
    if cpu_bind not in LOCAL_MODES:
        raise ConfigError(
            f"system.cpu_bind={cpu_bind!r} is a srun binding and this run is local; "
            "use system.cpu_bind=cores (each local rank takes its share of the cores) or null"
        )


def topology_order(cpus: list[int], sysfs: Path = SYSFS_CPUS) -> list[int]:
    """`cpus` by socket, then physical core, then number: the hyperthreads of a core sit together and a
    socket's cores before the next socket's (Linux often numbers core i's second thread i + N). CPU
    number order where sysfs does not say."""

    def place(cpu: int) -> tuple[int, int, int]:
        topology = sysfs / f"cpu{cpu}" / "topology"
        try:
            package = int((topology / "physical_package_id").read_text())
            core = int((topology / "core_id").read_text())
        except (OSError, ValueError):
            return (0, cpu, cpu)
        return (package, core, cpu)

    return sorted(cpus, key=place)


def cores_for(local_rank: int, local_world_size: int, cpus: list[int]) -> list[int]:
    """Rank `local_rank`'s share of `cpus` (in topology order): its block of equal contiguous blocks.
    The remainder goes to the first ranks; with fewer CPUs than ranks, ranks share one CPU each. Rank i
    lands on the i-th part of the sockets, which is where GPU i usually sits; `nvidia-smi topo -m`
    tells whether it does."""
    if len(cpus) < local_world_size:
        return [cpus[local_rank % len(cpus)]]
    size, extra = divmod(len(cpus), local_world_size)
    start = local_rank * size + min(local_rank, extra)
    return cpus[start : start + size + (local_rank < extra)]


def bind(cpu_bind: str | None, *, local_rank: int, local_world_size: int, launched_by: str) -> list[int] | None:
    """Binds this process as system.cpu_bind asks, unless srun did; returns the CPUs it may run on
    (None where the OS cannot say)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    if cpu_bind == "cores" and launched_by != "slurm":
        ordered = topology_order(list(os.sched_getaffinity(0)))
        os.sched_setaffinity(0, cores_for(local_rank, local_world_size, ordered))
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
