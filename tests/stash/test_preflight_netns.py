"""`ddlbench preflight system.hosts=[a,b,c]` on three network-namespace "hosts" (launchers/netns.py), one of them
slowed on purpose by a CPU quota (a cgroup its processes start in): that host, and only it, is named slow, in the
printed table and in the campaign's preflight/ files. The hosts' ssh is a stand-in on PATH that runs the command
in the host's namespace (the slowed host's inside the cgroup) with a fresh environment, as sshd gives one."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchers import netns
from tests.conftest import REPO

CGROUP_V1 = Path("/sys/fs/cgroup/cpu")  # cpu.cfs_quota_us / cpu.cfs_period_us
CGROUP_V2 = Path("/sys/fs/cgroup")  # cpu.max
SLOWED = 2  # the third host
QUOTA = 0.3  # of one core


@contextlib.contextmanager
def cpu_quota(share: float):
    """A cgroup whose processes get `share` of one core (cgroup v1 or v2); yields its cgroup.procs file."""
    name = f"ddlb-preflight-{os.getpid()}"
    if (CGROUP_V1 / "cpu.cfs_quota_us").exists():
        group = CGROUP_V1 / name
        settings = {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": str(int(share * 100000))}
    elif (
        "cpu" in (CGROUP_V2 / "cgroup.controllers").read_text(errors="ignore").split()
        if (CGROUP_V2 / "cgroup.controllers").exists()
        else False
    ):
        group = CGROUP_V2 / name
        settings = {"cpu.max": f"{int(share * 100000)} 100000"}
    else:
        pytest.skip("no cgroup cpu controller here (neither /sys/fs/cgroup/cpu nor cgroup v2's cpu)")
    try:
        group.mkdir()
        for key, value in settings.items():
            (group / key).write_text(value)
    except OSError as error:
        pytest.skip(f"cannot make a cgroup with a CPU quota here: {error}")
    try:
        yield group / "cgroup.procs"
    finally:
        for pid in (group / "cgroup.procs").read_text().split():  # none should be left: the run has ended
            (group.parent / "cgroup.procs").write_text(pid)
        group.rmdir()


def _ssh_stand_in(folder: Path, topo: netns.Topology, *, slowed: int) -> Path:
    """An `ssh` for the namespace hosts; the slowed host's command writes its pid to the file returned, for the
    test to move it into the quota's cgroup (inside `ip netns exec` the cgroup file systems are not mounted)."""
    pid_file = folder / "slowed.pid"
    cases = "".join(
        f"  {topo.address(i)}) ns={topo.node(i)};{' slowed=1;' if i == slowed else ''};\n"
        for i in range(topo.num_nodes)
    )
    ssh = folder / "ssh"
    ssh.write_text(
        "#!/bin/sh\n"
        "while [ $# -gt 0 ]; do case $1 in -o|-p|-i|-l) shift 2;; -*) shift;; *) break;; esac; done\n"
        "host=$1; shift; slowed=\n"
        "case $host in\n"
        f"{cases}"
        '  *) echo "ssh: Could not resolve hostname $host" >&2; exit 255;;\n'
        "esac\n"
        # the node program only (not hosts.check's probe, nor the fan-out's cleanup)
        f'case "$*" in *launchers.lifecycle.preflight*) [ -n "$slowed" ] && echo $$ > {pid_file};; esac\n'
        'exec ip netns exec "$ns" env -i PATH="$PATH" HOME="$HOME" sh -c "$*"\n'
    )
    ssh.chmod(0o755)
    return pid_file


def _join(pid_file: Path, procs: Path, proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """Move the slowed host's process (the ssh stand-in, which execs into the node program) into the cgroup."""
    deadline = time.monotonic() + timeout_s
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, "the slowed host's command never started"
        time.sleep(0.05)
    procs.write_text(pid_file.read_text().strip())


def test_the_host_under_a_cpu_quota_is_the_one_named_slow(netns_hosts, rank_processes, tmp_path):
    """3 hosts (a median needs three), a 40 s budget: about 35 s here."""
    hosts = [netns.Topology.address(i) for i in range(3)]
    with cpu_quota(QUOTA) as procs, netns.Emulation(num_nodes=3, link=netns.Link()) as topo:
        pid_file = _ssh_stand_in(tmp_path, topo, slowed=SLOWED)
        argv = netns.exec_in(
            topo.node(0),
            sys.executable,
            "-m",
            "ddlbench",
            "preflight",
            f"system.hosts=[{','.join(hosts)}]",
            "system.ranks_per_node=1",  # one GEMM thread per host: 3 hosts share 2 cores
            f"+system.env.GLOO_SOCKET_IFNAME={netns.IFNAME}",
            f"run.root={tmp_path / 'runs'}",
            "run.campaign=screened",
            "--budget-s",
            "40",
        )
        env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _join(pid_file, procs, proc)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    said = out + err
    assert proc.returncode == 0, said[-3000:]
    table = {line.split()[0]: line for line in out.splitlines() if line.split()[:1] and line.split()[0] in hosts}
    assert "slow (GEMM" in table[hosts[SLOWED]], said
    assert all(table[h].rstrip().endswith(" ok") for h in hosts if h != hosts[SLOWED]), said
    assert f"slow nodes: {hosts[SLOWED]} (campaign submit: --exclude={hosts[SLOWED]})" in out
    folder = tmp_path / "runs" / "screened" / "preflight"
    (kept,) = [p for p in folder.glob("*.json") if not p.name.endswith(".nodes.json")]
    document = json.loads(kept.read_text())
    assert document["exclude"] == [hosts[SLOWED]] and document["budget_s"] == 40
    assert [link["a"] + "-" + link["b"] for link in document["links"]] == [
        f"{hosts[0]}-{hosts[1]}",
        f"{hosts[1]}-{hosts[2]}",
        f"{hosts[2]}-{hosts[0]}",
    ]
    with open(kept.with_suffix(".csv")) as f:
        verdicts = {row["node"]: row["verdict"] for row in csv.DictReader(f)}
    assert [v.startswith("slow") for v in verdicts.values()] == [h == hosts[SLOWED] for h in hosts]
    print(out)
