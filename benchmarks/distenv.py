"""Who am I in the job: rank, local rank, world size and rendezvous address from the environment.

Launchers differ in what they set: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT),
Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, node list), OpenMPI's mpirun
(OMPI_COMM_WORLD_*) and PMIx (PMIX_RANK). A plain `python -m benchmarks` is a world of one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from benchmarks.errors import ConfigError

DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True, slots=True, kw_only=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    num_nodes: int
    master_addr: str
    master_port: int
    source: str  # torchrun | horovodrun | slurm | openmpi | pmix | single
    # devices this rank drives: 1, or for a single-process framework (DataParallel) every GPU it uses
    # (set by the app from the config: FrameworkConfig.local_layout; the launcher's variables count processes)
    devices_per_rank: int = 1

    @property
    def num_devices(self) -> int:
        """The GPUs (or CPU ranks) the run trains on: its world size in the run key and directory name."""
        return self.world_size * self.devices_per_rank

    def export(self) -> dict[str, str]:
        """The torch.distributed env:// variables, for frameworks that read them."""
        return {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }


def first_host(nodelist: str) -> str:
    """First host of a Slurm node list: 'gpu[007-009,012],login1' -> 'gpu007'."""
    match = re.match(r"^([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r} cannot be parsed; set MASTER_ADDR explicitly")
    prefix, ranges = match.groups()
    if ranges is None:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def _int(environ: Mapping[str, str], key: str) -> int:
    value = environ[key]
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {key}={value!r} is not an integer; fix the launcher") from None


def _port(environ: Mapping[str, str]) -> int:
    if "MASTER_PORT" in environ:
        return _int(environ, "MASTER_PORT")
    # distinct jobs on a shared node must not collide: derive the port from the job id
    if "SLURM_JOB_ID" in environ:
        return 20000 + _int(environ, "SLURM_JOB_ID") % 20000
    return DEFAULT_MASTER_PORT


def from_environ(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Read the launcher's variables (precedence: torchrun, horovodrun, OpenMPI, Slurm, PMIx, single process)."""
    env = os.environ if environ is None else environ
    addr = env.get("MASTER_ADDR")
    if "RANK" in env and "WORLD_SIZE" in env:
        world = _int(env, "WORLD_SIZE")
        # DeepSpeed's launcher exports LOCAL_SIZE where torchrun exports LOCAL_WORLD_SIZE
        local_world = int(env.get("LOCAL_WORLD_SIZE", env.get("LOCAL_SIZE", world)))
        return DistEnv(
            rank=_int(env, "RANK"),
            local_rank=int(env.get("LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=local_world,
            num_nodes=max(1, world // max(1, local_world)),
            master_addr=addr or "127.0.0.1",
            master_port=_port(env),
            source="torchrun",
        )
    if "HOROVOD_RANK" in env and "HOROVOD_SIZE" in env:
        # horovodrun --gloo sets only HOROVOD_* (its mpirun mode sets OMPI_* as well)
        world = _int(env, "HOROVOD_SIZE")
        return DistEnv(
            rank=_int(env, "HOROVOD_RANK"),
            local_rank=int(env.get("HOROVOD_LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=int(env.get("HOROVOD_LOCAL_SIZE", world)),
            num_nodes=int(env.get("HOROVOD_CROSS_SIZE", 1)),
            master_addr=addr or "127.0.0.1",
            master_port=_port(env),
            source="horovodrun",
        )
    slurm_nodes = int(env.get("SLURM_NNODES", env.get("SLURM_JOB_NUM_NODES", "1")))
    slurm_host = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    if "OMPI_COMM_WORLD_RANK" in env:
        world = _int(env, "OMPI_COMM_WORLD_SIZE")
        local_world = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", world))
        return DistEnv(
            rank=_int(env, "OMPI_COMM_WORLD_RANK"),
            local_rank=int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=local_world,
            num_nodes=max(1, world // max(1, local_world)),
            master_addr=addr or (first_host(slurm_host) if slurm_host else "127.0.0.1"),
            master_port=_port(env),
            source="openmpi",
        )
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        world = _int(env, "SLURM_NTASKS")
        return DistEnv(
            rank=_int(env, "SLURM_PROCID"),
            local_rank=int(env.get("SLURM_LOCALID", 0)),
            world_size=world,
            local_world_size=max(1, world // max(1, slurm_nodes)),
            num_nodes=slurm_nodes,
            master_addr=addr or (first_host(slurm_host) if slurm_host else "127.0.0.1"),
            master_port=_port(env),
            source="slurm",
        )
    if "PMIX_RANK" in env and "PMIX_SIZE" in env:
        world = _int(env, "PMIX_SIZE")
        return DistEnv(
            rank=_int(env, "PMIX_RANK"),
            local_rank=int(env.get("PMIX_LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=int(env.get("PMIX_LOCAL_SIZE", world)),
            num_nodes=1,
            master_addr=addr or "127.0.0.1",
            master_port=_port(env),
            source="pmix",
        )
    return DistEnv(
        rank=0,
        local_rank=0,
        world_size=1,
        local_world_size=1,
        num_nodes=1,
        master_addr=addr or "127.0.0.1",
        master_port=_port(env),
        source="single",
    )
