"""`ddlbench run` across hosts without a scheduler: `system.hosts=[a,b]`, or `system.hostfile=PATH` (lines
'<host> slots=<ranks per host>'), runs system.ranks_per_node ranks on each host through the framework's launcher
(framework.local_launcher: the several_hosts argv of launchers/programs/).

Run it on the first host, which holds the rendezvous. horovodrun and mpirun start the other hosts' ranks
themselves, over ssh. torchrun and deepspeed run on every host, so `ddlbench run` starts the other hosts'
launchers over ssh through the fan-out below (`python -m launchers.hosts`): when one host's launcher fails, the
fan-out stops the others, and Ctrl-C stops them all.

Before anything starts, every other host is asked over ssh whether it answers without a password and sees this
Python, the working directory and the run's folder. The ranks of every host write the run directory, so it must
be on a file system that all hosts mount, as under Slurm. Each failing check is a one-line error.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.errors import ConfigError
from launchers import local, programs
from launchers.programs.base import LOCAL, Launcher, training

# ssh never prompts: a host that asks for a password is a host we cannot reach
SSH = ("ssh", "-o", "BatchMode=yes")
CONNECT_TIMEOUT_S = 10
# what the other hosts' launchers need from here besides system.env: the same code on the path, and the user's own
# config options (a system profile of DDLBENCH_CONFIG: every host's ranks compose the same config)
FORWARDED = ("PYTHONPATH", "DDLBENCH_CONFIG")
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
HOSTFILE = "hostfile"  # written into the run directory for launchers that read one (deepspeed, mpirun)
STOP_GRACE_S = (3.0, 2.0, 2.0)  # SIGINT, SIGTERM, SIGKILL: within supervise.run_launcher's 10 s grace


@dataclass(frozen=True, slots=True)
class Hosts:
    """The hosts of a run, hosts[0] first; hostfile: the user's, where the hosts came from one."""

    hosts: tuple[str, ...]
    hostfile: str | None = None


def hosts_of(system) -> Hosts | None:
    """The hosts that system.hosts or system.hostfile name; None for a run on this machine alone."""
    names, hostfile = list(system.get("hosts") or []), system.get("hostfile")
    if not names and not hostfile:
        return None
    if names and hostfile:
        raise ConfigError("system.hosts and system.hostfile both name the hosts; set one of them")
    if hostfile:
        path = Path(str(hostfile)).expanduser()
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(
                f"system.hostfile={hostfile} cannot be read ({e.strerror}); give a file of '<host> slots=<N>' lines"
            ) from None
        names, slots = local.parse_hostfile(text, source=f"system.hostfile={hostfile}")
        if slots is None:
            raise ConfigError(
                f"system.hostfile={hostfile} names no slots; write '<host> slots=<ranks per host>' on each line "
                f"(system.ranks_per_node={system.ranks_per_node} ranks run on each host)"
            )
        if slots != system.ranks_per_node:
            raise ConfigError(
                f"system.hostfile={hostfile} gives slots={slots} but system.ranks_per_node={system.ranks_per_node}; "
                f"set system.ranks_per_node={slots}, or the slots to {system.ranks_per_node}"
            )
        return Hosts(tuple(names), str(path.resolve()))
    for name in names:
        if not HOST_NAME.fullmatch(str(name)):
            raise ConfigError(
                f"system.hosts: {str(name)!r} is no host name or address; give names like node1 or 10.0.0.2"
            )
    if len(set(names)) != len(names):
        raise ConfigError(f"system.hosts={names} names a host twice; give each host once")
    return Hosts(tuple(str(n) for n in names))


def is_this_machine(host: str) -> bool:
    """Whether `host` names this machine: its name, or an address of one of its interfaces."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        return False
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            try:
                s.bind((address, 0))  # only an address of this machine can be bound
                return True
            except OSError:
                continue
    return False


def _existing(path: Path) -> Path:
    """path, or its nearest folder above that exists."""
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check(hosts: Hosts, *, run_dir: Path, python: str | None = sys.executable, cwd: str | None = None) -> None:
    """ConfigError naming the host and the fix, before anything starts: the first host is not this machine, or
    another host does not answer over ssh or lacks this Python (None: the ranks run an image's), the working
    directory or the run's folder."""
    first = hosts.hosts[0]
    if not is_this_machine(first):
        raise ConfigError(
            f"system.hosts[0]={first} is not this machine: run `ddlbench run` on {first} (the first host holds the "
            "rendezvous and starts the others), or put this machine first"
        )
    cwd = cwd or os.getcwd()
    folder = _existing(run_dir)
    probe = (
        f"cd {shlex.quote(cwd)} || exit 11; "
        + (f"test -x {shlex.quote(python)} || exit 12; " if python else "")
        + f"test -d {shlex.quote(str(folder))} || exit 13"
    )
    others = hosts.hosts[1:]
    with ThreadPoolExecutor(max_workers=min(16, max(1, len(others)))) as pool:
        answers = list(pool.map(lambda host: _ask(host, probe), others))
    for host, (code, said) in zip(others, answers):
        if code == 0:
            continue
        if code == 11:
            raise ConfigError(
                f"host {host} has no folder {cwd}: run ddlbench from a folder that every host mounts at the same path"
            )
        if code == 12:
            raise ConfigError(
                f"host {host} has no {python}: install the same environment at the same path on every host "
                "(or on a file system they share)"
            )
        if code == 13:
            raise ConfigError(
                f"host {host} does not see {folder}: put run.root on a file system that every host mounts (the "
                "ranks of every host write the run directory)"
            )
        raise ConfigError(
            f"host {host} cannot be reached over ssh ({said or f'exit {code}'}); ddlbench starts its ranks with "
            f"`ssh {host}`: make `ssh {host} true` work without a password"
        )


def _ask(host: str, command: str) -> tuple[int, str]:
    """(exit code, ssh's last line on stderr) of `command` on host; 255 when ssh itself failed."""
    try:
        proc = subprocess.run(
            [*SSH, "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", host, command],
            capture_output=True,
            text=True,
            timeout=CONNECT_TIMEOUT_S + 20,
        )
    except subprocess.TimeoutExpired:
        return 255, f"no answer within {CONNECT_TIMEOUT_S + 20} s"
    except FileNotFoundError:
        return 255, "no ssh client on this machine (apt-get install openssh-client)"
    lines = proc.stderr.strip().splitlines()
    return proc.returncode, lines[-1] if lines else ""


@dataclass(frozen=True, slots=True)
class Launch:
    """How `ddlbench run` starts a run across hosts: `argv` here (supervise.run_launcher runs it), which is
    the launcher itself where it starts every host (horovodrun, mpirun), else the fan-out; `shown`: (host, command)
    of each launch, for the user; `hostfile`: the file to write first (text), for launchers that read one."""

    argv: list[str]
    shown: list[tuple[str, str]]
    hostfile: tuple[Path, str] | None


def plan(
    hosts: Hosts,
    *,
    launcher: str,
    ranks_per_node: int,
    master_port: int,
    overrides: Sequence[str],
    run_dir: Path,
    env: Mapping[str, str],
    python: str = sys.executable,
    container: Sequence[str] = (),
    cleanup: Sequence[str] | None = None,
) -> Launch:
    """The launch of a training run over `hosts`; env: what every host's launcher is given (system.env);
    python: what the ranks run (system.python, launchers/node_python.py; in a container, the image's);
    container: the prefix that runs each host's launcher inside an image, cleanup what removes a host's
    containers once its launcher is stopped (launchers/container.py)."""
    if container and not programs.get(launcher, LOCAL).runs_on_every_host:
        raise ConfigError(
            f"system.container with system.hosts needs a launcher that runs on every host, inside its container "
            f"(torchrun, deepspeed); framework.local_launcher={launcher} would start the other hosts' ranks over ssh "
            "from inside the image: choose framework.local_launcher=torchrun, or submit through Slurm"
        )
    written = None
    hostfile = hosts.hostfile
    if hostfile is None and programs.get(launcher, LOCAL).reads_hostfile:
        path = run_dir / HOSTFILE
        written, hostfile = (path, local.hostfile_text(hosts.hosts, slots=ranks_per_node)), str(path)
    shape = local.hosts_shape(
        hosts=hosts.hosts,
        ranks_per_node=ranks_per_node,
        master_port=master_port,
        hostfile=hostfile,
        interfaces=interfaces_of(env),
    )
    try:
        launches = local.hosts_commands(launcher, shape, training(overrides, python=python))
        launches = [(host, [*container, *argv]) for host, argv in launches]
    except NotImplementedError:
        raise ConfigError(
            f"framework.local_launcher={launcher} does not start ranks across hosts; choose one of "
            f"{', '.join(n for n, item in programs.LAUNCHERS.items() if _across(item))}"
        ) from None
    if len(launches) == 1:
        return Launch(argv=launches[0][1], shown=[(launches[0][0], shlex.join(launches[0][1]))], hostfile=written)
    return spread(launches, master_port=master_port, env=env, cleanup=cleanup, hostfile=written)


def spread(
    launches: Sequence[tuple[str, list[str]]],
    *,
    master_port: int,
    env: Mapping[str, str],
    cleanup: Sequence[str] | None = None,
    hostfile: tuple[Path, str] | None = None,
) -> Launch:
    """The fan-out of (host, argv) launches, the first here and the others over ssh (`python -m launchers.hosts`):
    a training run's launchers (plan), or any program with one process per host (`ddlbench preflight`)."""
    forwarded = {**{k: os.environ[k] for k in FORWARDED if k in os.environ}, **{k: str(v) for k, v in env.items()}}
    token = f"{master_port}-{os.getpid()}"
    spec = {
        "cwd": os.getcwd(),
        "env": forwarded,
        "cleanup": list(cleanup or ()),
        "launches": [
            {"host": host, "argv": argv, "pidfile": _pidfile(token, i)} for i, (host, argv) in enumerate(launches)
        ],
    }
    shown = [(launches[0][0], shlex.join(launches[0][1]))]
    shown += [
        (item["host"], shlex.join(_remote(item, cwd=spec["cwd"], env=forwarded))) for item in spec["launches"][1:]
    ]
    return Launch(argv=[sys.executable, "-m", "launchers.hosts", json.dumps(spec)], shown=shown, hostfile=hostfile)


def interfaces_of(env: Mapping[str, str]) -> tuple[str, ...]:
    """The interfaces the run names for its sockets (GLOO_SOCKET_IFNAME, else NCCL_SOCKET_IFNAME, where a plain
    comma list of names); () where it names none."""
    for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        names = [n.strip() for n in str(env.get(key, "")).split(",") if n.strip()]
        if names and all(HOST_NAME.fullmatch(n) for n in names):
            return tuple(names)
    return ()


def _across(item) -> bool:
    return type(item).several_hosts is not Launcher.several_hosts


def _pidfile(token: str, node: int) -> str:
    return f"/tmp/ddlbench-{token}-host{node}.pid"


def _remote(item: Mapping, *, cwd: str, env: Mapping[str, str]) -> list[str]:
    """ssh argv of one host's launcher: in the same folder, with env, its pid written where the stop finds it."""
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    command = (
        f"cd {shlex.quote(cwd)} && echo $$ > {shlex.quote(item['pidfile'])} && "
        f"exec env {assignments} {shlex.join(item['argv'])}"
    )
    return [*SSH, item["host"], command]


# --- the fan-out: one launcher per host, the first here -------------------------------------------------


class _Stopped(Exception):
    pass


def _raise_stopped(_signum, _frame) -> None:
    raise _Stopped


def fan_out(spec: Mapping) -> int:
    """Start every host's launcher (the first on this machine, the others over ssh) and wait for all; the first
    to fail stops the others, and so does a signal. The exit code: the first failure's, else 0."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _raise_stopped)
    first, *others = spec["launches"]
    procs: list[tuple[str, subprocess.Popen]] = []
    try:
        procs.append((first["host"], subprocess.Popen(first["argv"])))
        for item in others:
            # a session of its own: a Ctrl-C of this group ends no ssh, whose remote launcher would live on
            ssh = subprocess.Popen(_remote(item, cwd=spec["cwd"], env=spec["env"]), start_new_session=True)
            procs.append((item["host"], ssh))
        while True:
            codes = [p.poll() for _, p in procs]
            failed = [(host, code) for (host, _), code in zip(procs, codes) if code not in (None, 0)]
            if failed:
                host, code = failed[0]
                print(
                    f"[ddlbench] host {host}: its launcher exited with code {code}; stopping the other hosts' ranks",
                    file=sys.stderr,
                    flush=True,
                )
                _stop_all(procs, others)
                return code
            if all(code == 0 for code in codes):
                return 0
            time.sleep(0.2)
    except _Stopped:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        _stop_all(procs, others)
        return 130
    finally:
        # a host's container outlives its launcher killed by SIGKILL: removed by its label (launchers/container.py)
        cleanup = f"; {shlex.join(spec['cleanup'])} >/dev/null 2>&1" if spec.get("cleanup") else ""
        for item in others:
            command = f"rm -f {shlex.quote(item['pidfile'])}{cleanup}"
            subprocess.run([*SSH, item["host"], command], capture_output=True)


def _stop_all(procs: list[tuple[str, subprocess.Popen]], others: Sequence[Mapping]) -> None:
    """SIGINT, then SIGTERM, then SIGKILL to every launcher still running: to the first here, to the others
    over ssh, by the pid each wrote; each signal waits its grace for all of them at once."""
    here = procs[0][1] if procs else None
    # a remote launcher runs while its ssh does (each ssh has a session of its own: no signal of ours ended it)
    running = [item for item, (_, p) in zip(others, procs[1:]) if p.poll() is None]
    with ThreadPoolExecutor(max_workers=16) as pool:
        for sig, wait_s in zip(("INT", "TERM", "KILL"), STOP_GRACE_S):
            if here is not None and here.poll() is None:
                here.send_signal(getattr(signal, f"SIG{sig}"))
            asked = [(item, pool.submit(_signal_remote, item, sig, wait_s)) for item in running]
            deadline = time.monotonic() + wait_s
            while here is not None and here.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            running = [item for item, gone in asked if not gone.result()]
            if not running and (here is None or here.poll() is not None):
                break
    for _, p in procs[1:]:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _signal_remote(item: Mapping, sig: str, wait_s: float) -> bool:
    """Signal a host's launcher by the pid it wrote; True once it is gone (or never wrote one)."""
    pidfile = shlex.quote(item["pidfile"])
    polls = max(1, int(wait_s / 0.1))
    command = (
        f"pid=$(cat {pidfile} 2>/dev/null) || exit 0; kill -{sig} $pid 2>/dev/null || exit 0; "
        f"for i in $(seq {polls}); do kill -0 $pid 2>/dev/null || exit 0; sleep 0.1; done; exit 1"
    )
    try:
        proc = subprocess.run([*SSH, item["host"], command], capture_output=True, timeout=wait_s + 10)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m launchers.hosts SPEC_JSON (written by launchers.hosts.plan)", file=sys.stderr)
        return 2
    return fan_out(json.loads(args[0]))


if __name__ == "__main__":
    sys.exit(main())
