"""Who am I in the job: rank, local rank, world size and rendezvous address from the environment.

Launchers differ in what they set: torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT),
Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, node list), OpenMPI's mpirun
(OMPI_COMM_WORLD_*) and PMIx (PMIX_RANK); each launcher's module in launchers/programs/ reads its own.
A plain `python -m benchmarks` is a world of one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from launchers.programs import LAUNCHERS
from launchers.programs.base import RankVariables, integer

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


def _port(environ: Mapping[str, str]) -> int:
    if "MASTER_PORT" in environ:
        return integer(environ, "MASTER_PORT")
    # distinct jobs on a shared node must not collide: derive the port from the job id
    if "SLURM_JOB_ID" in environ:
        return 20000 + integer(environ, "SLURM_JOB_ID") % 20000
    return DEFAULT_MASTER_PORT


def from_environ(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Read the launcher's variables: each launcher of launchers/programs/ in its order (torchrun, horovodrun,
    OpenMPI, Slurm or PMIx) until one finds its own; none set: a world of one."""
    env = os.environ if environ is None else environ
    found = next(filter(None, (launcher.rank_variables(env) for launcher in LAUNCHERS.values())), None)
    if found is None:
        found = RankVariables(rank=0, local_rank=0, world_size=1, local_world_size=1, num_nodes=1, source="single")
    return DistEnv(
        rank=found.rank,
        local_rank=found.local_rank,
        world_size=found.world_size,
        local_world_size=found.local_world_size,
        num_nodes=found.num_nodes,
        master_addr=env.get("MASTER_ADDR") or found.master_addr or "127.0.0.1",
        master_port=_port(env),
        source=found.source,
    )
