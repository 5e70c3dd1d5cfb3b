"""OpenMPI's mpirun: on one machine, across hosts from a hostfile (once, on the first host; ssh to the
others), and inside a Slurm allocation (it reads the node list from Slurm itself)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from launchers.programs.base import (
    LOCAL,
    SLURM,
    JobShape,
    Launcher,
    Probe,
    RankProgram,
    RankVariables,
    integer,
    slurm_head,
)


class Mpirun(Launcher):
    name = "mpirun"
    scopes = frozenset({LOCAL, SLURM})
    order = 2
    reads_hostfile = True
    probe = Probe("program", "mpirun", "apt-get install openmpi-bin libopenmpi-dev")

    def one_host(self, shape: JobShape, program: RankProgram) -> list[str]:
        # --bind-to none: ranks share few cores on small machines; binding is a site profile's decision
        root = ["--allow-run-as-root"] if shape.as_root else []
        return [
            "mpirun",
            "-np",
            str(shape.nproc),
            *root,
            "--bind-to",
            "none",
            "--oversubscribe",
            *shape.mpirun_args,
            *program.argv(),
        ]

    def several_hosts(self, shape: JobShape, program: RankProgram) -> list[str]:
        """The hostfile, ranks_per_node per host; MASTER_ADDR/PORT exported to every rank (torch-rendezvous
        frameworks under mpirun read them: benchmarks/distenv.py)."""
        root = ["--allow-run-as-root"] if shape.as_root else []
        return [
            "mpirun",
            "-np",
            str(shape.nproc),
            *root,
            "--hostfile",
            shape.hostfile_for(self.name),
            "--map-by",
            f"ppr:{shape.ranks_per_node}:node",
            "--bind-to",
            "none",
            "-x",
            f"MASTER_ADDR={shape.head}",
            "-x",
            f"MASTER_PORT={shape.master_port}",
            *shape.mpirun_args,
            *program.argv(),
        ]

    def in_allocation(self, shape: JobShape, program: RankProgram) -> list[str]:
        placed = replace(shape, mpirun_args=("--map-by", f"ppr:{shape.ranks_per_node}:node", *shape.mpirun_args))
        return self.one_host(placed, program)

    def rank_variables(self, environ: Mapping[str, str]) -> RankVariables | None:
        if "OMPI_COMM_WORLD_RANK" not in environ:
            return None
        world = integer(environ, "OMPI_COMM_WORLD_SIZE")
        local_world = int(environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", world))
        return RankVariables(
            rank=integer(environ, "OMPI_COMM_WORLD_RANK"),
            local_rank=int(environ.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=local_world,
            num_nodes=max(1, world // max(1, local_world)),
            source="openmpi",
            master_addr=slurm_head(environ),  # inside a Slurm job: its first node
        )


LAUNCHER = Mpirun()
