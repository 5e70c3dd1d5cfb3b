"""Single-machine launch: N local ranks of `python -m benchmarks` through the framework's launcher.

Pure functions: a config in, an argv out. Quoting is never done here; argv lists go to
subprocess as they are, and shlex.join renders them for humans.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from benchmarks.errors import ConfigError

BENCHMARK_MODULE = ["-m", "benchmarks"]


def torchrun(*, nproc: int, master_port: int, overrides: Sequence[str], python: str = sys.executable) -> list[str]:
    return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            f"--master-port={master_port}", *BENCHMARK_MODULE, *overrides]


def horovodrun(*, nproc: int, overrides: Sequence[str], python: str = sys.executable) -> list[str]:
    # `horovodrun` is not installed by pip --target; the module is the same launcher
    return [python, "-m", "horovod.runner.launch", "-np", str(nproc), "-H", f"localhost:{nproc}", "--gloo",
            python, *BENCHMARK_MODULE, *overrides]


def mpirun(
    *, nproc: int, overrides: Sequence[str], python: str = sys.executable, extra: Sequence[str] = (), as_root: bool = False
) -> list[str]:
    # --bind-to none: ranks share few cores on small machines; binding is a site profile's decision.
    # OpenMPI refuses to start as root (containers, CI) unless told that it is on purpose.
    root = ["--allow-run-as-root"] if as_root else []
    return ["mpirun", "-np", str(nproc), *root, "--bind-to", "none", "--oversubscribe", *extra,
            python, *BENCHMARK_MODULE, *overrides]


def deepspeed(*, nproc: int, master_port: int, overrides: Sequence[str], python: str = sys.executable) -> list[str]:
    # --no_local_rank: the ranks read LOCAL_RANK from the environment; a --local_rank argument is no Hydra override
    return [python, "-m", "deepspeed.launcher.runner", f"--num_gpus={nproc}", f"--master_port={master_port}",
            "--no_local_rank", "--module", "benchmarks", *overrides]


def local_command(
    *, launcher: str, nproc: int, master_port: int, overrides: Sequence[str], as_root: bool | None = None
) -> list[str]:
    """The argv that starts `nproc` local ranks with the given launcher name (framework.local_launcher).
    as_root: whether we run as root (mpirun needs to be told); None: ask the OS."""
    if as_root is None:
        as_root = os.geteuid() == 0
    if launcher == "torchrun":
        return torchrun(nproc=nproc, master_port=master_port, overrides=overrides)
    if launcher == "horovodrun":
        return horovodrun(nproc=nproc, overrides=overrides)
    if launcher == "mpirun":
        return mpirun(nproc=nproc, overrides=overrides, as_root=as_root)
    if launcher == "deepspeed":
        return deepspeed(nproc=nproc, master_port=master_port, overrides=overrides)
    raise ConfigError(f"framework.local_launcher={launcher!r} is unknown; choose torchrun, horovodrun, mpirun or deepspeed")
