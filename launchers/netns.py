"""Emulated multi-node on one machine (Stash network stall): every "node" is a network namespace.

    hub namespace ddlb-<tag>-hub:   bridge br0  <- b0, b1, ... (one veth end per node)
    node namespace ddlb-<tag>-n<i>: veth0 = 10.77.0.<i+1>/24, the other veth end, egress shaped by tc

Each node's link is shaped on its own egress (tbf for bandwidth, netem for latency where the kernel
has sch_netem), so traffic between two nodes crosses two shaped queues, one per direction, as on a
switched network whose slowest link throttles the ring. Ranks cannot be started by torchrun across
namespaces: each rank is its own `ip netns exec <ns> python -m benchmarks ...` with torchrun-style
RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/MASTER_ADDR (benchmarks/distenv.py), and gloo is told
the interface (GLOO_SOCKET_IFNAME). Only addresses inside namespaces we create are used; everything
is deleted afterwards, also when a rank fails (`ddlbench stash netns-clean` for a killed session).

Command builders are pure (argv lists, tested exactly); `Emulation` runs them.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.errors import ConfigError
from launchers.programs.base import RankProgram, training

PREFIX = "ddlb-"
SUBNET = "10.77.0"
IFNAME = "veth0"  # every node's end of its veth pair (names are per namespace)


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One node's shaped uplink; None = unshaped."""

    rate_mbit: float | None = None
    delay_ms: float | None = None

    def describe(self) -> str:
        parts = [f"{self.rate_mbit:g} Mbit/s" if self.rate_mbit else "unshaped bandwidth"]
        if self.delay_ms:
            parts.append(f"+{self.delay_ms:g} ms")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    tag: str
    num_nodes: int
    link: Link

    @property
    def hub(self) -> str:
        return f"{PREFIX}{self.tag}-hub"

    def node(self, i: int) -> str:
        return f"{PREFIX}{self.tag}-n{i}"

    @property
    def namespaces(self) -> list[str]:
        return [self.hub, *(self.node(i) for i in range(self.num_nodes))]

    @staticmethod
    def ifname(i: int) -> str:
        """Node i's interface: the same name on every node, as a cluster's nodes name their NICs alike
        (horovodrun across hosts looks for an interface that every host has)."""
        return IFNAME

    @staticmethod
    def address(i: int) -> str:
        return f"{SUBNET}.{i + 1}"


def new_tag() -> str:
    return secrets.token_hex(3)  # namespace names stay short; interface names are per namespace


def exec_in(ns: str, *argv: str) -> list[str]:
    """Wrapper: the argv that runs argv (any launcher's or rank program's) inside namespace ns."""
    return ["ip", "netns", "exec", ns, *argv]


def shaping_commands(topo: Topology, i: int, *, netem: bool) -> list[list[str]]:
    """tc on node i's egress: tbf (bandwidth) and/or netem (latency, and bandwidth with it)."""
    link, dev, ns = topo.link, topo.ifname(i), topo.node(i)
    if link.delay_ms:
        if not netem:
            raise ConfigError(
                f"stash.net_latency_ms={link.delay_ms:g} needs the kernel's sch_netem (modprobe sch_netem), "
                "which this machine lacks; set stash.net_latency_ms=0 (bandwidth shaping uses tbf)"
            )
        rate = ["rate", f"{link.rate_mbit:g}mbit"] if link.rate_mbit else []
        return [exec_in(ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{link.delay_ms:g}ms", *rate)]
    if link.rate_mbit:
        # burst: 10 ms of traffic (>= rate/HZ for any HZ), at least 16 KiB; a 50 ms queue
        burst = max(16384, int(link.rate_mbit * 1e6 / 8 / 100))
        return [
            exec_in(
                ns,
                "tc",
                "qdisc",
                "add",
                "dev",
                dev,
                "root",
                "tbf",
                "rate",
                f"{link.rate_mbit:g}mbit",
                "burst",
                str(burst),
                "latency",
                "50ms",
            )
        ]
    return []


def setup_commands(topo: Topology, *, netem: bool = False) -> list[list[str]]:
    """Every command that builds the topology, in order."""
    hub = topo.hub
    cmds = [
        ["ip", "netns", "add", hub],
        exec_in(hub, "ip", "link", "set", "lo", "up"),
        exec_in(hub, "ip", "link", "add", "br0", "type", "bridge"),
        exec_in(hub, "ip", "link", "set", "br0", "up"),
    ]
    for i in range(topo.num_nodes):
        ns, dev = topo.node(i), topo.ifname(i)
        cmds += [
            ["ip", "netns", "add", ns],
            exec_in(ns, "ip", "link", "set", "lo", "up"),
            exec_in(hub, "ip", "link", "add", f"b{i}", "type", "veth", "peer", "name", dev, "netns", ns),
            exec_in(hub, "ip", "link", "set", f"b{i}", "master", "br0"),
            exec_in(hub, "ip", "link", "set", f"b{i}", "up"),
            exec_in(ns, "ip", "addr", "add", f"{topo.address(i)}/24", "dev", dev),
            exec_in(ns, "ip", "link", "set", dev, "up"),
            *shaping_commands(topo, i, netem=netem),
        ]
    return cmds


# `ip netns exec NAME` mounts what NETNS_ETC/NAME holds over /etc: each emulated host gets its own hosts file
NETNS_ETC = Path("/etc/netns")


def write_hosts_file(name: str, address: str) -> Path:
    """The machine's /etc/hosts for namespace `name`, with the machine's hostname resolving to the namespace's
    address, as a real host's name resolves to its own address. Horovod's Gloo binds to the address of the
    hostname whatever HOROVOD_GLOO_IFACE says; with the shared /etc/hosts that is 127.0.0.1 in every namespace,
    and the hosts cannot reach each other."""
    hostname = socket.gethostname()
    try:
        lines = Path("/etc/hosts").read_text().splitlines()
    except OSError:
        lines = ["127.0.0.1 localhost"]
    kept = [line for line in lines if hostname not in line.split("#", 1)[0].split()]
    folder = NETNS_ETC / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hosts").write_text("\n".join([*kept, f"{address} {hostname}"]) + "\n")
    return folder


def remove_hosts_file(name: str) -> None:
    shutil.rmtree(NETNS_ETC / name, ignore_errors=True)


def teardown_commands(namespaces: Sequence[str]) -> list[list[str]]:
    """Deleting a namespace deletes its veth ends, and with them their peers and the bridge."""
    return [["ip", "netns", "delete", ns] for ns in namespaces]


def rank_env(topo: Topology, *, rank: int, world_size: int, ranks_per_node: int, master_port: int) -> dict[str, str]:
    """torchrun-style variables for one rank, rendezvous on node 0's veth address."""
    node = rank // ranks_per_node
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank % ranks_per_node),
        "LOCAL_WORLD_SIZE": str(ranks_per_node),
        "MASTER_ADDR": topo.address(0),
        "MASTER_PORT": str(master_port),
        "GLOO_SOCKET_IFNAME": topo.ifname(node),
        "NCCL_SOCKET_IFNAME": topo.ifname(node),
    }


def rank_argv(topo: Topology, program: RankProgram, *, rank: int, ranks_per_node: int) -> list[str]:
    """One rank of any rank program, in its node's namespace (no launcher: run_ranks starts each)."""
    return exec_in(topo.node(rank // ranks_per_node), *program.argv())


def rank_command(
    topo: Topology, *, rank: int, ranks_per_node: int, overrides: Sequence[str], python: str = sys.executable
) -> list[str]:
    """One training rank (`python -m benchmarks OVERRIDES`) in its node's namespace."""
    return rank_argv(topo, training(overrides, python=python), rank=rank, ranks_per_node=ranks_per_node)


# ---- running ----


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


def list_namespaces(prefix: str = PREFIX) -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip() and line.split()[0].startswith(prefix)]


def clean(prefix: str = PREFIX) -> list[str]:
    """Delete every namespace whose name starts with prefix (what a killed session left), and their hosts
    files; returns the namespaces."""
    gone = []
    for ns in list_namespaces(prefix):
        if _run(["ip", "netns", "delete", ns]).returncode == 0:
            gone.append(ns)
    for folder in NETNS_ETC.glob(f"{prefix}*"):
        shutil.rmtree(folder, ignore_errors=True)
    return gone


def capabilities() -> dict[str, str | None]:
    """What this machine permits: None where it works, else why not (netns, tbf, netem)."""
    found: dict[str, str | None] = {"netns": None, "tbf": None, "netem": None}
    try:
        probe = Topology(tag=f"p{new_tag()}", num_nodes=1, link=Link())
    except Exception as error:  # pragma: no cover
        return {k: str(error) for k in found}
    try:
        for argv in setup_commands(probe):
            done = _run(argv)
            if done.returncode:
                said = done.stderr.strip() or f"exit {done.returncode}"
                return {k: f"{' '.join(argv[:4])}: {said}" for k in found}
        for kind, argv in (
            (
                "tbf",
                [
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    IFNAME,
                    "root",
                    "tbf",
                    "rate",
                    "100mbit",
                    "burst",
                    "16384",
                    "latency",
                    "50ms",
                ],
            ),
            ("netem", ["tc", "qdisc", "replace", "dev", IFNAME, "root", "netem", "delay", "1ms"]),
        ):
            done = _run(exec_in(probe.node(0), *argv))
            if done.returncode:
                found[kind] = f"tc qdisc {argv[4]} {kind}: {done.stderr.strip()}"
    except FileNotFoundError as error:
        return {k: f"{error.filename} not found (apt-get install -y iproute2)" for k in found}
    finally:
        for argv in teardown_commands(probe.namespaces):
            try:
                _run(argv)
            except (OSError, subprocess.SubprocessError):
                pass
    return found


@dataclass
class Emulation:
    """Context manager: build the topology, tear it down on exit (also after an exception)."""

    num_nodes: int
    link: Link
    tag: str = field(default_factory=new_tag)
    created: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.topology = Topology(tag=self.tag, num_nodes=self.num_nodes, link=self.link)

    def __enter__(self) -> Topology:
        caps = capabilities()
        if caps["netns"]:
            raise ConfigError(
                f"network namespaces are not permitted here ({caps['netns']}); run stash as root on Linux, "
                "or skip the network pair with stash.nodes=1"
            )
        if self.link.rate_mbit and not self.link.delay_ms and caps["tbf"]:
            raise ConfigError(
                f"stash.net_bandwidth_mbit={self.link.rate_mbit:g} needs tc tbf ({caps['tbf']}); "
                "set stash.net_bandwidth_mbit=0 for an unshaped link"
            )
        try:
            for argv in setup_commands(self.topology, netem=caps["netem"] is None):
                if argv[:3] == ["ip", "netns", "add"]:
                    self.created.append(argv[3])
                done = _run(argv)
                if done.returncode:
                    raise RuntimeError(f"netns setup failed: {' '.join(argv)}: {done.stderr.strip()}")
            for node in range(self.topology.num_nodes):
                write_hosts_file(self.topology.node(node), self.topology.address(node))
        except BaseException:
            self.close()
            raise
        return self.topology

    def close(self) -> None:
        for argv in teardown_commands(list(reversed(self.created))):
            _run(argv)
        for name in self.created:
            remove_hosts_file(name)
        self.created.clear()

    def __exit__(self, *exc) -> None:
        self.close()


def run_ranks(
    topo: Topology,
    *,
    world_size: int,
    ranks_per_node: int,
    overrides: Sequence[str] = (),
    master_port: int,
    env: dict[str, str] | None = None,
    timeout_s: float = 1800.0,
    python: str = sys.executable,
    program: RankProgram | None = None,
) -> int:
    """Start one process per rank in its node's namespace; if one fails, stop the others. Exit code of the job.
    Each rank runs `program` (default: training with `overrides`)."""
    procs: list[subprocess.Popen] = []
    program = program or training(overrides, python=python)
    base = {**os.environ, **(env or {})}
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        base.pop(key, None)
    try:
        for rank in range(world_size):
            argv = rank_argv(topo, program, rank=rank, ranks_per_node=ranks_per_node)
            procs.append(
                subprocess.Popen(
                    argv,
                    env={
                        **base,
                        **rank_env(
                            topo,
                            rank=rank,
                            world_size=world_size,
                            ranks_per_node=ranks_per_node,
                            master_port=master_port,
                        ),
                    },
                )
            )
        deadline = time.monotonic() + timeout_s
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                return failed[0]
            if all(c == 0 for c in codes):
                return 0
            if time.monotonic() > deadline:
                return 124
            time.sleep(0.1)
    finally:
        _stop(procs)


def _stop(procs: list[subprocess.Popen]) -> None:
    """Terminate the ranks we started that still run (by pid), then kill what ignores it."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        p.send_signal(signal.SIGTERM)
    end = time.monotonic() + 10
    for p in alive:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
