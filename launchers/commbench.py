"""`ddlbench commbench`'s launch: start the ranks of `python -m benchmarks.commbench` through the same
launchers as `ddlbench run` (launchers/programs/: their argv on this machine, or across --hosts /
--hostfile); the ranks do the work (benchmarks/commbench/); the command is ddlbench/commbench.py."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from benchmarks.adapter_config import config_default
from benchmarks.commbench import BACKENDS, MPI, framework_of, rendezvous_of
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.frameworks.configs import LocalLauncher, Rendezvous
from launchers import local, programs
from launchers.programs.base import LOCAL, RankProgram

MODULE = "benchmarks.commbench"
MPI_FIX = "pip install 'ddlbench[mpi]' (mpi4py; needs an MPI library, e.g. apt-get install -y openmpi-bin)"
DEFAULT_HOSTS_PORT = 29500  # every host must be told the same rendezvous port: no random one across hosts


def _launcher_of(backend: str) -> str:
    """torch-rendezvous backends share one torchrun launch (one torch.distributed group); a framework that
    joins its ranks itself (Rendezvous.own: Horovod) is started by its own default local launcher, and MPI
    by mpirun."""
    framework = framework_of(backend)
    if framework is None:
        return str(LocalLauncher.mpirun)
    own = rendezvous_of(backend) is Rendezvous.own
    return str(config_default(FRAMEWORKS[framework], "local_launcher") if own else LocalLauncher.torchrun)


# the local launcher that starts each backend's ranks (launch facts of the framework configs)
BACKEND_LAUNCHERS = {backend: _launcher_of(backend) for backend in BACKENDS}


def rank_program(rank_args: Sequence[str]) -> RankProgram:
    return RankProgram(module=MODULE, args=tuple(rank_args))


def launcher_for(backends: Sequence[str]) -> str:
    """The one local launcher that starts every backend of the list (ConfigError when they need several)."""
    unknown = [b for b in backends if b not in BACKEND_LAUNCHERS]
    if unknown:
        raise ConfigError(
            f"--backends {','.join(backends)}: {', '.join(map(repr, unknown))} is unknown; "
            f"choose from {', '.join(BACKENDS)}"
        )
    groups: dict[str, list[str]] = {}
    for backend in backends:
        groups.setdefault(BACKEND_LAUNCHERS[backend], []).append(backend)
    if len(groups) > 1:
        apart = " and ".join(f"--backends {','.join(names)}" for names in groups.values())
        started = ", ".join(f"{','.join(names)} by {launcher}" for launcher, names in groups.items())
        raise ConfigError(
            f"--backends {','.join(backends)}: started by different launchers ({started}); run them apart: {apart}"
        )
    return next(iter(groups))


def check_backends(backends: Sequence[str], *, device: str) -> None:
    """What the ranks would fail on, said before they start: MPI needs mpi4py and host memory."""
    if MPI in backends:
        if importlib.util.find_spec("mpi4py") is None:
            raise ConfigError(f"--backends mpi needs the mpi4py package, which this Python lacks; run {MPI_FIX}")
        if device == "cuda":
            raise ConfigError(
                "--backends mpi moves host memory (commbench hands MPI no GPU buffers); "
                "--device cuda is not for it: pass --device auto or cpu"
            )


def commbench_command(*, launcher: str, nproc: int, master_port: int, rank_args: Sequence[str]) -> list[str]:
    """The argv that starts `nproc` local commbench ranks with a registered local launcher."""
    shape = local.local_shape(nproc=nproc, master_port=master_port)
    return programs.get(launcher, LOCAL, label="commbench launcher").one_host(shape, rank_program(rank_args))


def hosts_commands(
    *,
    launcher: str,
    hosts: Sequence[str],
    nproc_per_host: int,
    master_port: int,
    rank_args: Sequence[str],
    hostfile: str | None = None,
) -> list[tuple[str, list[str]]]:
    """(host, argv) of every launch across hosts: one per host for torchrun/deepspeed, one on hosts[0] else."""
    shape = local.hosts_shape(hosts=hosts, ranks_per_node=nproc_per_host, master_port=master_port, hostfile=hostfile)
    programs.get(launcher, LOCAL, label="commbench launcher")
    return local.hosts_commands(launcher, shape, rank_program(rank_args))
