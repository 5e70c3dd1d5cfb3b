"""Slurm's srun inside an allocation: one task per rank, and one failed task ends the step. With
--mpi=pmix (a site profile's system.mpi) the ranks also see PMIx's variables."""

from __future__ import annotations

from collections.abc import Mapping

from launchers.programs.base import SLURM, JobShape, Launcher, Probe, RankProgram, RankVariables, integer, slurm_head


class Srun(Launcher):
    name = "srun"
    scopes = frozenset({SLURM})
    order = 3
    probe = Probe(
        "program", "srun", "slurm/local_cluster.sh up (a local test cluster) or load your site's Slurm module"
    )

    def in_allocation(self, shape: JobShape, program: RankProgram) -> list[str]:
        mpi = [f"--mpi={shape.mpi}"] if shape.mpi else []
        cpus = [f"--cpus-per-task={shape.cpus_per_rank}"] if shape.cpus_per_rank else []
        bind = [f"--cpu-bind={shape.cpu_bind}"] if shape.cpu_bind else []
        return [
            "srun",
            *mpi,
            f"--ntasks={shape.nproc}",
            f"--ntasks-per-node={shape.ranks_per_node}",
            *cpus,
            "--kill-on-bad-exit=1",
            *bind,
            *shape.srun_args,
            *program.argv(),
        ]

    def rank_variables(self, environ: Mapping[str, str]) -> RankVariables | None:
        if "SLURM_PROCID" in environ and "SLURM_NTASKS" in environ:
            nodes = int(environ.get("SLURM_NNODES", environ.get("SLURM_JOB_NUM_NODES", "1")))
            world = integer(environ, "SLURM_NTASKS")
            return RankVariables(
                rank=integer(environ, "SLURM_PROCID"),
                local_rank=int(environ.get("SLURM_LOCALID", 0)),
                world_size=world,
                local_world_size=max(1, world // max(1, nodes)),
                num_nodes=nodes,
                source="slurm",
                master_addr=slurm_head(environ),
            )
        if "PMIX_RANK" in environ and "PMIX_SIZE" in environ:  # a PMIx launcher without Slurm's variables
            world = integer(environ, "PMIX_SIZE")
            return RankVariables(
                rank=integer(environ, "PMIX_RANK"),
                local_rank=int(environ.get("PMIX_LOCAL_RANK", 0)),
                world_size=world,
                local_world_size=int(environ.get("PMIX_LOCAL_SIZE", world)),
                num_nodes=1,
                source="pmix",
            )
        return None


LAUNCHER = Srun()
