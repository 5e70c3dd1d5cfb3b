"""What every launcher is: the job's shape and the rank program in, the argv that starts the ranks out, and
how a rank finds its place in the job in the variables the launcher set. Torch-free and pure: argv lists
go to subprocess as they are (shlex.join renders them for humans), and nothing here starts a process."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from benchmarks.errors import ConfigError

TRAINING_MODULE = "benchmarks"
# the config keys that name a launcher, by the scope it is picked for
LOCAL = "framework.local_launcher"  # `ddlbench run` on this machine, or across hosts without a scheduler
SLURM = "system.launcher"  # inside a Slurm allocation (slurm/run.sh)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobShape:
    """How many ranks, on how many nodes, how they meet, and the site's launcher flags."""

    nproc: int  # ranks in all
    num_nodes: int = 1
    master_port: int = 0  # read by launchers that host the rendezvous themselves (torchrun, deepspeed)
    as_root: bool = False  # OpenMPI refuses to start as root unless told that it is on purpose
    # the ranks may start as forks of the launcher's process, where the launcher can (torchrun;
    # launchers/lifecycle/forked_rank.py), rather than as fresh Pythons: a CPU run of one thread per rank where no GPU
    # driver is (launchers/local.py ranks_may_fork says why)
    fork_ranks: bool = False
    # the system profile's launcher flags (benchmarks/schema.py SystemConfig holds their defaults);
    # None leaves the launcher's own default
    cpus_per_rank: int | None = None  # srun --cpus-per-task
    mpi: str | None = None  # srun --mpi=<plugin>
    cpu_bind: str | None = None  # srun --cpu-bind=<value>
    mpirun_args: tuple[str, ...] = ()  # extra mpirun flags
    srun_args: tuple[str, ...] = ()  # extra srun flags (a pyxis container's --container-image, ...)
    # several hosts without a scheduler: one address or name per node, hosts[0] holds the rendezvous (at
    # master_port); node_rank is the host an argv is for, where the launcher runs on every host (torchrun,
    # deepspeed --no_ssh); hostfile is the "<host> slots=<ranks per node>" file some launchers read
    hosts: tuple[str, ...] = ()
    node_rank: int = 0
    hostfile: str | None = None
    # the network interfaces the ranks talk over, where the run names them (GLOO_SOCKET_IFNAME in system.env):
    # horovodrun otherwise probes every host's interfaces for common routable ones, and may pick loopback
    interfaces: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.nproc >= 1 and self.num_nodes >= 1 and self.nproc % self.num_nodes == 0, self
        assert not self.hosts or (len(self.hosts) == self.num_nodes and 0 <= self.node_rank < self.num_nodes), self

    @property
    def ranks_per_node(self) -> int:
        return self.nproc // self.num_nodes

    @property
    def head(self) -> str:
        """The host that holds the rendezvous (hosts[0])."""
        assert self.hosts, "a multi-host argv needs JobShape.hosts"
        return self.hosts[0]

    def hostfile_for(self, launcher: str) -> str:
        """The hostfile a launcher across hosts reads; ConfigError with the fix when none was given."""
        if self.hostfile is None:
            raise ConfigError(
                f"{launcher} across hosts reads a hostfile and none was given; pass --hostfile PATH "
                "(lines '<host> slots=<ranks per host>', written by launchers.local.hostfile_text)"
            )
        return self.hostfile


@dataclass(frozen=True, slots=True, kw_only=True)
class RankProgram:
    """What every rank runs: `python -m <module> <args>`, inside a container where `container` is its prefix
    (`apptainer exec ... IMAGE`: launchers/container.py; each rank of an srun or mpirun step in one of its own)."""

    module: str
    args: tuple[str, ...] = ()
    python: str = sys.executable
    container: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [*self.container, self.python, "-m", self.module, *self.args]

    def main_file(self) -> str:
        """The file `python -m <module>` runs (a package's __main__.py), as this interpreter finds it."""
        import importlib.util

        spec = importlib.util.find_spec(self.module)
        assert spec is not None and spec.origin, f"no module {self.module}"
        if spec.submodule_search_locations is not None:  # a package: its __main__
            spec = importlib.util.find_spec(f"{self.module}.__main__")
            assert spec is not None and spec.origin, f"package {self.module} has no __main__"
        return spec.origin


def training(overrides: Sequence[str], *, python: str = sys.executable, container: Sequence[str] = ()) -> RankProgram:
    """The training rank: `python -m benchmarks OVERRIDES` (in a container: behind its prefix)."""
    return RankProgram(module=TRAINING_MODULE, args=tuple(overrides), python=python, container=tuple(container))


@dataclass(frozen=True, slots=True, kw_only=True)
class RankVariables:
    """A rank's place in the job as its launcher's variables give it; benchmarks/distenv.py adds the
    rendezvous address and port defaults. source names the launcher (recorded in the run's meta.json)."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    num_nodes: int
    source: str
    master_addr: str | None = None  # where the variables name the rendezvous host (a Slurm node list)


@dataclass(frozen=True, slots=True)
class Probe:
    """What `ddlbench doctor` checks for a launcher: a program on PATH, or a Python package importable."""

    kind: str  # "program" | "module"
    name: str
    fix: str


class Launcher:
    """One way of starting ranks. A subclass sets the class attributes and overrides the argv builders of
    the scopes it serves; one module per launcher in this package, each ending in `LAUNCHER = <instance>`."""

    name: ClassVar[str]
    scopes: ClassVar[frozenset[str]]  # LOCAL and/or SLURM: the config keys that may name it
    # whose variables a rank reads first when several launchers' are set (an mpirun inside a Slurm job sets
    # OpenMPI's and Slurm's; horovodrun's MPI mode sets Horovod's and OpenMPI's); also the order names are listed in
    order: ClassVar[int]
    runs_on_every_host: ClassVar[bool] = False  # across hosts: one argv per host (else one, on hosts[0])
    reads_hostfile: ClassVar[bool] = False  # across hosts: the hosts come as a file, not on the command line
    # its one-host argv is `python -m <module>` of this interpreter, which may run as a fork of `ddlbench run`
    # (launchers/lifecycle/supervise.py): the CLI has imported torch already, the launcher need not import it again
    forks: ClassVar[bool] = False
    probe: ClassVar[Probe]

    def one_host(self, shape: JobShape, program: RankProgram) -> list[str]:
        """shape.nproc ranks on this machine (scope LOCAL)."""
        raise NotImplementedError(f"{self.name} does not start ranks on one machine")

    def several_hosts(self, shape: JobShape, program: RankProgram) -> list[str]:
        """The argv for host shape.node_rank of shape.hosts, no scheduler (scope LOCAL)."""
        raise NotImplementedError(f"{self.name} does not start ranks across hosts")

    def in_allocation(self, shape: JobShape, program: RankProgram) -> list[str]:
        """Every rank of a Slurm job, started from inside its allocation (scope SLURM)."""
        raise NotImplementedError(f"{self.name} does not start ranks in a Slurm allocation")

    def rank_variables(self, environ: Mapping[str, str]) -> RankVariables | None:
        """This rank's place in the job from the launcher's variables; None when they are not set."""
        return None


def integer(environ: Mapping[str, str], key: str) -> int:
    value = environ[key]
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {key}={value!r} is not an integer; fix the launcher") from None


def first_host(nodelist: str) -> str:
    """First host of a Slurm node list: 'gpu[007-009,012],login1' -> 'gpu007'."""
    match = re.match(r"^([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r} cannot be parsed; set MASTER_ADDR explicitly")
    prefix, ranges = match.groups()
    if ranges is None:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def slurm_head(environ: Mapping[str, str]) -> str | None:
    """The first host of the Slurm step's (or job's) node list; None outside Slurm."""
    nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST")
    return first_host(nodelist) if nodelist else None
