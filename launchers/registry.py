"""Launchers as a registry: a job's shape and a rank program in, the argv that starts every rank out.

A builder is a pure function `(JobShape, RankProgram) -> argv`; it knows how its launcher spreads
ranks and nothing about what they run, so training (`-m benchmarks OVERRIDES`) and commbench
(`-m benchmarks.commbench ARGS`) go through the same builders. Builders register by name in the
registry of the scope that picks them: launchers/local.py (framework.local_launcher) and
launchers/slurm.py (system.launcher, inside an allocation). A wrapper (launchers/netns.py
`exec_in`) takes a finished argv and returns the argv that runs it somewhere else.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.errors import ConfigError

TRAINING_MODULE = "benchmarks"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobShape:
    """How many ranks, on how many nodes, how they meet, and the site's launcher flags."""

    nproc: int  # ranks in all
    num_nodes: int = 1
    master_port: int = 0  # read by launchers that host the rendezvous themselves (torchrun, deepspeed)
    as_root: bool = False  # OpenMPI refuses to start as root unless told that it is on purpose
    # the system profile's launcher flags (benchmarks/schema.py SystemConfig holds their defaults);
    # None leaves the launcher's own default
    cpus_per_rank: int | None = None  # srun --cpus-per-task
    mpi: str | None = None  # srun --mpi=<plugin>
    cpu_bind: str | None = None  # srun --cpu-bind=<value>
    mpirun_args: tuple[str, ...] = ()  # extra mpirun flags
    # several hosts without a scheduler (launchers/local.py HOSTS): one address or name per node, hosts[0]
    # holds the rendezvous (at master_port); node_rank is the host an argv is for, where the launcher runs
    # on every host (torchrun, deepspeed --no_ssh); hostfile is the "<host> slots=<ranks per node>" file
    # that mpirun and deepspeed read (hostfile_text writes it)
    hosts: tuple[str, ...] = ()
    node_rank: int = 0
    hostfile: str | None = None

    def __post_init__(self) -> None:
        assert self.nproc >= 1 and self.num_nodes >= 1 and self.nproc % self.num_nodes == 0, self
        assert not self.hosts or (len(self.hosts) == self.num_nodes and 0 <= self.node_rank < self.num_nodes), self

    @property
    def ranks_per_node(self) -> int:
        return self.nproc // self.num_nodes


@dataclass(frozen=True, slots=True, kw_only=True)
class RankProgram:
    """What every rank runs: `python -m <module> <args>`."""

    module: str
    args: tuple[str, ...] = ()
    python: str = sys.executable

    def argv(self) -> list[str]:
        return [self.python, "-m", self.module, *self.args]


def training(overrides: Sequence[str], *, python: str = sys.executable) -> RankProgram:
    """The training rank: `python -m benchmarks OVERRIDES`."""
    return RankProgram(module=TRAINING_MODULE, args=tuple(overrides), python=python)


class Builder(Protocol):
    def __call__(self, shape: JobShape, program: RankProgram, /) -> list[str]: ...


def _choices(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


@dataclass(slots=True, kw_only=True)
class Registry:
    """Builders by launcher name, for the config key that names one (errors name that key)."""

    key: str
    builders: dict[str, Builder] = field(default_factory=dict)

    def register(self, name: str) -> Callable[[Builder], Builder]:
        def add(builder: Builder) -> Builder:
            assert name not in self.builders, f"{self.key}: launcher {name!r} registered twice"
            self.builders[name] = builder
            return builder

        return add

    def names(self) -> list[str]:
        return list(self.builders)

    def get(self, name: str, *, key: str | None = None) -> Builder:
        """The builder registered as name; ConfigError naming the key and the registered names otherwise."""
        if name not in self.builders:
            raise ConfigError(f"{key or self.key}={name!r} is unknown; choose {_choices(self.names())}")
        return self.builders[name]

    def build(self, name: str, shape: JobShape, program: RankProgram) -> list[str]:
        return self.get(name)(shape, program)
