"""Launch without a scheduler: N local ranks of a rank program through the framework's launcher, or the
same launchers across several hosts (a host list or a hostfile: no Slurm).

Pure builders, registered under the names framework.local_launcher takes: LAUNCHERS (one machine) and
HOSTS (several: JobShape.hosts), a job shape and a rank program in (launchers/registry.py), an argv out.
torchrun and deepspeed (--no_ssh) run once on every host (JobShape.node_rank says which); horovodrun and
mpirun run once, on hosts[0], and start the other hosts' ranks over ssh (RUNS_ON_EVERY_HOST).
Quoting is never done here; argv lists go to subprocess as they are, and shlex.join renders them for humans.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import replace

from benchmarks.errors import ConfigError
from launchers.registry import JobShape, RankProgram, Registry, training

LAUNCHERS = Registry(key="framework.local_launcher")


@LAUNCHERS.register("torchrun")
def torchrun(shape: JobShape, program: RankProgram, /) -> list[str]:
    return [
        program.python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={shape.nproc}",
        f"--master-port={shape.master_port}",
        "-m",
        program.module,
        *program.args,
    ]


@LAUNCHERS.register("horovodrun")
def horovodrun(shape: JobShape, program: RankProgram, /) -> list[str]:
    # `horovodrun` is not installed by pip --target; the module is the same launcher
    return [
        program.python,
        "-m",
        "horovod.runner.launch",
        "-np",
        str(shape.nproc),
        "-H",
        f"localhost:{shape.nproc}",
        "--gloo",
        *program.argv(),
    ]


@LAUNCHERS.register("mpirun")
def mpirun(shape: JobShape, program: RankProgram, /) -> list[str]:
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


@LAUNCHERS.register("deepspeed")
def deepspeed(shape: JobShape, program: RankProgram, /) -> list[str]:
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


def local_shape(*, nproc: int, master_port: int, as_root: bool | None = None) -> JobShape:
    """nproc ranks on this machine; as_root None: ask the OS (mpirun needs to be told)."""
    return JobShape(nproc=nproc, master_port=master_port, as_root=os.geteuid() == 0 if as_root is None else as_root)


def local_command(
    *, launcher: str, nproc: int, master_port: int, overrides: Sequence[str], as_root: bool | None = None
) -> list[str]:
    """The argv that starts `nproc` local training ranks with the launcher named by framework.local_launcher."""
    return LAUNCHERS.build(
        launcher, local_shape(nproc=nproc, master_port=master_port, as_root=as_root), training(overrides)
    )


# --- several hosts, no scheduler ---------------------------------------------------------------

HOSTS = Registry(key="framework.local_launcher")
# launchers whose argv is run on every host (one per node_rank); the others run once, on hosts[0]
RUNS_ON_EVERY_HOST = frozenset({"torchrun", "deepspeed"})
READS_HOSTFILE = frozenset({"mpirun", "deepspeed"})  # they take the hosts as a file, not on the command line


def _head(shape: JobShape) -> str:
    assert shape.hosts, "a multi-host builder needs JobShape.hosts"
    return shape.hosts[0]


@HOSTS.register("torchrun")
def torchrun_hosts(shape: JobShape, program: RankProgram, /) -> list[str]:
    """torchrun on host node_rank, c10d rendezvous on hosts[0]:master_port. The store's host is named
    (is_host) rather than guessed from the machine's host name, and each agent offers its own address
    (--local-addr) as MASTER_ADDR: hosts that share a host name (network namespaces, containers) or resolve
    it to an address the others cannot reach would otherwise not meet. c10d numbers the nodes itself
    (torchrun ignores --node-rank with it, and says so), so no --node-rank."""
    host = shape.hosts[shape.node_rank]
    return [
        program.python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={shape.num_nodes}",
        f"--nproc-per-node={shape.ranks_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={_head(shape)}:{shape.master_port}",
        f"--rdzv-id=ddlbench-{shape.master_port}",
        f"--rdzv-conf=is_host={int(shape.node_rank == 0)}",
        f"--local-addr={host}",
        "-m",
        program.module,
        *program.args,
    ]


@HOSTS.register("horovodrun")
def horovodrun_hosts(shape: JobShape, program: RankProgram, /) -> list[str]:
    """horovodrun on hosts[0]: -H host:slots for every host; Gloo, as on one machine; ssh to the others."""
    slots = ",".join(f"{host}:{shape.ranks_per_node}" for host in shape.hosts)
    return [
        program.python,
        "-m",
        "horovod.runner.launch",
        "-np",
        str(shape.nproc),
        "-H",
        slots,
        "--gloo",
        *program.argv(),
    ]


@HOSTS.register("mpirun")
def mpirun_hosts(shape: JobShape, program: RankProgram, /) -> list[str]:
    """mpirun on hosts[0] with the hostfile, ranks_per_node per host; MASTER_ADDR/PORT exported to every
    rank (torch-rendezvous frameworks under mpirun read them: benchmarks/distenv.py)."""
    root = ["--allow-run-as-root"] if shape.as_root else []
    return [
        "mpirun",
        "-np",
        str(shape.nproc),
        *root,
        "--hostfile",
        _hostfile(shape, "mpirun"),
        "--map-by",
        f"ppr:{shape.ranks_per_node}:node",
        "--bind-to",
        "none",
        "-x",
        f"MASTER_ADDR={_head(shape)}",
        "-x",
        f"MASTER_PORT={shape.master_port}",
        *shape.mpirun_args,
        *program.argv(),
    ]


@HOSTS.register("deepspeed")
def deepspeed_hosts(shape: JobShape, program: RankProgram, /) -> list[str]:
    """DeepSpeed's launcher on host node_rank without ssh (--no_ssh: each host starts its own ranks, as
    torchrun), the hostfile for the world's layout, rendezvous on hosts[0]:master_port."""
    return [
        program.python,
        "-m",
        "deepspeed.launcher.runner",
        f"--hostfile={_hostfile(shape, 'deepspeed')}",
        "--no_ssh",
        f"--node_rank={shape.node_rank}",
        f"--num_nodes={shape.num_nodes}",
        f"--num_gpus={shape.ranks_per_node}",
        f"--master_addr={_head(shape)}",
        f"--master_port={shape.master_port}",
        "--no_local_rank",
        "--module",
        program.module,
        *program.args,
    ]


def _hostfile(shape: JobShape, launcher: str) -> str:
    if shape.hostfile is None:
        raise ConfigError(
            f"{launcher} across hosts reads a hostfile and none was given; pass --hostfile PATH "
            "(lines '<host> slots=<ranks per host>', written by launchers.local.hostfile_text)"
        )
    return shape.hostfile


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
    )


def hosts_commands(launcher: str, shape: JobShape, program: RankProgram) -> list[tuple[str, list[str]]]:
    """(host, argv) for every launch a multi-host job needs: one per host for RUNS_ON_EVERY_HOST, else
    one on hosts[0]."""
    build = HOSTS.get(launcher)
    if launcher not in RUNS_ON_EVERY_HOST:
        return [(shape.hosts[0], build(replace(shape, node_rank=0), program))]
    return [(host, build(replace(shape, node_rank=i), program)) for i, host in enumerate(shape.hosts)]


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
