"""Single-machine launch: N local ranks of a rank program through the framework's launcher.

Pure builders, registered in LAUNCHERS under the names framework.local_launcher takes: a job shape
and a rank program in (launchers/registry.py), an argv out. Quoting is never done here; argv lists
go to subprocess as they are, and shlex.join renders them for humans.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from launchers.registry import JobShape, RankProgram, Registry, training

LAUNCHERS = Registry(key="framework.local_launcher")


@LAUNCHERS.register("torchrun")
def torchrun(shape: JobShape, program: RankProgram, /) -> list[str]:
    return [program.python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={shape.nproc}",
            f"--master-port={shape.master_port}", "-m", program.module, *program.args]


@LAUNCHERS.register("horovodrun")
def horovodrun(shape: JobShape, program: RankProgram, /) -> list[str]:
    # `horovodrun` is not installed by pip --target; the module is the same launcher
    return [program.python, "-m", "horovod.runner.launch", "-np", str(shape.nproc), "-H", f"localhost:{shape.nproc}",
            "--gloo", *program.argv()]


@LAUNCHERS.register("mpirun")
def mpirun(shape: JobShape, program: RankProgram, /) -> list[str]:
    # --bind-to none: ranks share few cores on small machines; binding is a site profile's decision
    root = ["--allow-run-as-root"] if shape.as_root else []
    return ["mpirun", "-np", str(shape.nproc), *root, "--bind-to", "none", "--oversubscribe", *shape.mpirun_args,
            *program.argv()]


@LAUNCHERS.register("deepspeed")
def deepspeed(shape: JobShape, program: RankProgram, /) -> list[str]:
    # --no_local_rank: the ranks read LOCAL_RANK from the environment; a --local_rank argument is no Hydra override
    return [program.python, "-m", "deepspeed.launcher.runner", f"--num_gpus={shape.nproc}",
            f"--master_port={shape.master_port}", "--no_local_rank", "--module", program.module, *program.args]


def local_shape(*, nproc: int, master_port: int, as_root: bool | None = None) -> JobShape:
    """nproc ranks on this machine; as_root None: ask the OS (mpirun needs to be told)."""
    return JobShape(nproc=nproc, master_port=master_port, as_root=os.geteuid() == 0 if as_root is None else as_root)


def local_command(
    *, launcher: str, nproc: int, master_port: int, overrides: Sequence[str], as_root: bool | None = None
) -> list[str]:
    """The argv that starts `nproc` local training ranks with the launcher named by framework.local_launcher."""
    return LAUNCHERS.build(launcher, local_shape(nproc=nproc, master_port=master_port, as_root=as_root),
                           training(overrides))
