"""Launch without a scheduler: N local ranks of a rank program through the launcher framework.local_launcher
names (launchers/programs/, one module per launcher), or the same launchers across several hosts (a host
list or a hostfile: no Slurm). Launchers that run on every host (torchrun, deepspeed --no_ssh) get one argv
per host (JobShape.node_rank says which); the others (horovodrun, mpirun) run once, on hosts[0], and start
the other hosts' ranks over ssh. Quoting is never done here; argv lists go to subprocess as they are, and
shlex.join renders them for humans.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace

from benchmarks.errors import ConfigError
from launchers import programs
from launchers.programs.base import LOCAL, JobShape, RankProgram, training


def local_shape(*, nproc: int, master_port: int, as_root: bool | None = None, fork_ranks: bool = False) -> JobShape:
    """nproc ranks on this machine; as_root None: ask the OS (mpirun needs to be told); fork_ranks: a CPU run
    (JobShape.fork_ranks)."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    return JobShape(nproc=nproc, master_port=master_port, as_root=as_root, fork_ranks=fork_ranks)


def ranks_may_fork(cfg) -> bool:
    """Whether a run's ranks may start as forks of their launcher (JobShape.fork_ranks): a CPU run's of one
    thread per rank (system.cpus_per_rank=1, as on local_cpu) on a machine without a GPU driver. Neither
    CUDA nor GNU OpenMP's thread pool survives a fork:
    - a process that asked torch whether CUDA is there (torch.cuda.is_available(), as DeepSpeed and the
      checks do) has its forks refuse CUDA ("Cannot re-initialize CUDA in forked subprocess"), and DeepSpeed
      or a GPU-aware check in the rank asks again, even for a CPU run: seen on the H200 machine;
    - a rank forked from a process that had computed on several threads (a pytest worker; a `ddlbench run`
      that built a model) hangs in its first parallel region, unless it computes on one thread."""
    return cfg.system.device == "cpu" and int(cfg.system.cpus_per_rank) == 1 and not gpu_driver()


def gpu_driver() -> bool:
    """Whether this machine has a GPU driver (NVIDIA's, or AMD's for ROCm), asked without initialising CUDA."""
    return any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd"))


def local_command(
    *,
    launcher: str,
    nproc: int,
    master_port: int,
    overrides: Sequence[str],
    as_root: bool | None = None,
    fork_ranks: bool = False,
    python: str = sys.executable,
    container: Sequence[str] = (),
) -> list[str]:
    """The argv that starts `nproc` local training ranks with the launcher named by framework.local_launcher;
    fork_ranks: a CPU run, whose ranks may start as forks of the launcher (JobShape.fork_ranks); container: the
    prefix that runs the launcher and its ranks inside an image (launchers/container.py), `python` the image's."""
    assert not (fork_ranks and container), "a container's ranks never fork from ddlbench run"
    shape = local_shape(nproc=nproc, master_port=master_port, as_root=as_root, fork_ranks=fork_ranks)
    return [*container, *programs.get(launcher, LOCAL).one_host(shape, training(overrides, python=python))]


# --- several hosts, no scheduler ---------------------------------------------------------------


def hostfile_text(hosts: Sequence[str], *, slots: int) -> str:
    """The hostfile mpirun, deepspeed and horovodrun all read: '<host> slots=<N>' per line."""
    return "".join(f"{host} slots={slots}\n" for host in hosts)


HOSTFILE_LINE = re.compile(r"^(?P<host>[^\s:#]+)(?::(?P<colon>\d+)|\s+slots\s*=\s*(?P<slots>\d+))?\s*(?:#.*)?$")


def parse_hostfile(text: str, *, source: str = "--hostfile") -> tuple[list[str], int | None]:
    """(hosts, slots per host) of a hostfile ('<host> slots=N', '<host>:N' or '<host>'; # comments); slots
    None when no line gives any. Every host must have the same slots (a job shape is uniform)."""
    hosts, slots = [], set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = HOSTFILE_LINE.match(line.strip())
        if match is None:
            raise ConfigError(f"{source} line {number} {line.strip()!r} is no host line; write '<host> slots=<N>'")
        hosts.append(match["host"])
        slots.add(int(match["slots"] or match["colon"] or 0))
    if not hosts:
        raise ConfigError(f"{source} lists no host; write one '<host> slots=<N>' line per host")
    if len(set(hosts)) != len(hosts):
        raise ConfigError(
            f"{source} lists a host twice ({', '.join(sorted({h for h in hosts if hosts.count(h) > 1}))}); "
            "give each host once with its slots"
        )
    given = slots - {0}
    if len(given) > 1 or (given and 0 in slots):
        raise ConfigError(
            f"{source} gives hosts different slots ({', '.join(map(str, sorted(slots)))}); "
            "every host runs the same number of ranks: give each the same slots="
        )
    return hosts, (given.pop() if given else None)


def hosts_shape(
    *,
    hosts: Sequence[str],
    ranks_per_node: int,
    master_port: int,
    node_rank: int = 0,
    hostfile: str | None = None,
    as_root: bool | None = None,
    mpirun_args: Sequence[str] = (),
    interfaces: Sequence[str] = (),
) -> JobShape:
    """ranks_per_node ranks on each of `hosts`; hosts[0] holds the rendezvous at master_port."""
    if len(set(hosts)) != len(hosts) or not hosts:
        raise ConfigError(f"hosts {list(hosts)} must name each host once; e.g. --hosts node1,node2")
    if ranks_per_node < 1:
        raise ConfigError(f"system.ranks_per_node={ranks_per_node} must be >= 1 (ranks on each host)")
    if not 0 <= node_rank < len(hosts):
        raise ConfigError(f"--node-rank {node_rank} is not a host of {list(hosts)}; give 0..{len(hosts) - 1}")
    return JobShape(
        nproc=ranks_per_node * len(hosts),
        num_nodes=len(hosts),
        master_port=master_port,
        as_root=os.geteuid() == 0 if as_root is None else as_root,
        hosts=tuple(hosts),
        node_rank=node_rank,
        hostfile=hostfile,
        mpirun_args=tuple(mpirun_args),
        interfaces=tuple(interfaces),
    )


def hosts_commands(launcher: str, shape: JobShape, program: RankProgram) -> list[tuple[str, list[str]]]:
    """(host, argv) for every launch a multi-host job needs: one per host for a launcher that runs on every
    host, else one on hosts[0]."""
    chosen = programs.get(launcher, LOCAL)
    if not chosen.runs_on_every_host:
        return [(shape.hosts[0], chosen.several_hosts(replace(shape, node_rank=0), program))]
    return [(host, chosen.several_hosts(replace(shape, node_rank=i), program)) for i, host in enumerate(shape.hosts)]


def hosts_training_commands(
    *,
    launcher: str,
    hosts: Sequence[str],
    ranks_per_node: int,
    master_port: int,
    overrides: Sequence[str],
    hostfile: str | None = None,
    as_root: bool | None = None,
) -> list[tuple[str, list[str]]]:
    """(host, argv) of a training run over `hosts` with the launcher named by framework.local_launcher (not yet
    started by `ddlbench run`, which starts ranks on this machine; the namespace tests run them)."""
    shape = hosts_shape(
        hosts=hosts, ranks_per_node=ranks_per_node, master_port=master_port, hostfile=hostfile, as_root=as_root
    )
    return hosts_commands(launcher, shape, training(overrides))


def free_port() -> int:
    """A TCP port nobody listens on now, for the ranks' rendezvous on this machine."""
    with socket.socket() as s:
        s.bind(("", 0))  # every interface: the ranks of other hosts reach it too
        return s.getsockname()[1]
