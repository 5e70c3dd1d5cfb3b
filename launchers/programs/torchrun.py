"""torchrun (torch.distributed.run): the default for DDP, FSDP and DataParallel on one machine; across hosts it
runs on every host and the hosts meet at a c10d rendezvous on the first."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from launchers.programs.base import LOCAL, JobShape, Launcher, Probe, RankProgram, RankVariables, integer


class Torchrun(Launcher):
    name = "torchrun"
    scopes = frozenset({LOCAL})
    order = 0  # RANK/WORLD_SIZE beat the scheduler's variables: torchrun under srun numbers its own ranks
    runs_on_every_host = True
    forks = True  # its agent is torch.distributed.run: 3.6 s of a fresh Python + torch spared per run
    probe = Probe("module", "torch", "pip install torch (make venv)")

    def one_host(self, shape: JobShape, program: RankProgram) -> list[str]:
        """torchrun on this machine. Ranks that may fork (a CPU run) start as forks of torchrun's agent, which
        runs their module's file (--run-path): the agent has imported torch and, forked from `ddlbench run`,
        the rank's own modules (4-6 s of CPU per rank on the 2-core machine)."""
        if shape.fork_ranks and program.python == sys.executable:
            rank = ["--run-path", "--start-method=fork", program.main_file()]
        else:
            rank = ["-m", program.module]
        return [
            program.python,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={shape.nproc}",
            f"--master-port={shape.master_port}",
            *rank,
            *program.args,
        ]

    def several_hosts(self, shape: JobShape, program: RankProgram) -> list[str]:
        """torchrun on host node_rank, c10d rendezvous on hosts[0]:master_port. The store's host is named
        (is_host) rather than guessed from the machine's host name, and each agent offers its own address
        (--local-addr) as MASTER_ADDR: hosts that share a host name (network namespaces, containers) or
        resolve it to an address the others cannot reach would otherwise not meet. c10d numbers the nodes
        itself (torchrun ignores --node-rank with it, and says so), so no --node-rank."""
        return [
            program.python,
            "-m",
            "torch.distributed.run",
            f"--nnodes={shape.num_nodes}",
            f"--nproc-per-node={shape.ranks_per_node}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={shape.head}:{shape.master_port}",
            f"--rdzv-id=ddlbench-{shape.master_port}",
            f"--rdzv-conf=is_host={int(shape.node_rank == 0)}",
            f"--local-addr={shape.hosts[shape.node_rank]}",
            "-m",
            program.module,
            *program.args,
        ]

    def rank_variables(self, environ: Mapping[str, str]) -> RankVariables | None:
        if "RANK" not in environ or "WORLD_SIZE" not in environ:
            return None
        world = integer(environ, "WORLD_SIZE")
        # DeepSpeed's launcher sets torchrun's variables, with LOCAL_SIZE where torchrun has LOCAL_WORLD_SIZE
        local_world = int(environ.get("LOCAL_WORLD_SIZE", environ.get("LOCAL_SIZE", world)))
        return RankVariables(
            rank=integer(environ, "RANK"),
            local_rank=int(environ.get("LOCAL_RANK", 0)),
            world_size=world,
            local_world_size=local_world,
            num_nodes=max(1, world // max(1, local_world)),
            source="torchrun",
        )


LAUNCHER = Torchrun()
