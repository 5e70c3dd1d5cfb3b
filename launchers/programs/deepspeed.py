"""DeepSpeed's launcher (deepspeed.launcher.runner); across hosts it runs on every host without ssh
(--no_ssh) and reads the world's layout from a hostfile. Its ranks read torchrun's variables (torchrun.py)."""

from __future__ import annotations

from launchers.programs.base import LOCAL, JobShape, Launcher, Probe, RankProgram


class Deepspeed(Launcher):
    name = "deepspeed"
    scopes = frozenset({LOCAL})
    order = 4
    runs_on_every_host = True
    reads_hostfile = True
    probe = Probe("module", "deepspeed", "DS_BUILD_OPS=0 pip install -e '.[deepspeed]' (make deepspeed)")

    def one_host(self, shape: JobShape, program: RankProgram) -> list[str]:
        # --no_local_rank: the ranks read LOCAL_RANK from the environment; a --local_rank argument is no Hydra override
        return [
            program.python,
            "-m",
            "deepspeed.launcher.runner",
            f"--num_gpus={shape.nproc}",
            f"--master_port={shape.master_port}",
            "--no_local_rank",
            "--module",
            program.module,
            *program.args,
        ]

    def several_hosts(self, shape: JobShape, program: RankProgram) -> list[str]:
        """On host node_rank; rendezvous on hosts[0]:master_port."""
        return [
            program.python,
            "-m",
            "deepspeed.launcher.runner",
            f"--hostfile={shape.hostfile_for(self.name)}",
            "--no_ssh",
            f"--node_rank={shape.node_rank}",
            f"--num_nodes={shape.num_nodes}",
            f"--num_gpus={shape.ranks_per_node}",
            f"--master_addr={shape.head}",
            f"--master_port={shape.master_port}",
            "--no_local_rank",
            "--module",
            program.module,
            *program.args,
        ]


LAUNCHER = Deepspeed()
