"""`ddlbench run system.hosts=[a,b]` on two network-namespace "hosts" (launchers/netns.py), no scheduler: one
command on the first host starts every rank (launchers/hosts.py), and the run directory comes out as from
Slurm. The hosts' ssh is a stand-in on PATH that runs the command in the host's namespace with a fresh
environment, as sshd gives one (PATH and HOME only): what the run needs on the other host must be forwarded."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.hosts import host_times
from analysis.load import load_campaign
from launchers import netns
from tests.conftest import REPO

TRAIN = (
    "model=simple_cnn",
    "loader=synthetic",
    "run.per_gpu_batch=4",
    "run.warmup_steps=1",
    "run.log_every=0",
    "system.ranks_per_node=1",
    f"+system.env.GLOO_SOCKET_IFNAME={netns.IFNAME}",
)


def _ssh_stand_in(folder: Path, topo: netns.Topology) -> Path:
    """An `ssh` for the namespace hosts: options skipped, the host mapped to its namespace, every call logged."""
    cases = "".join(f"  {topo.address(i)}) ns={topo.node(i)};;\n" for i in range(topo.num_nodes))
    ssh = folder / "ssh"
    ssh.write_text(
        "#!/bin/sh\n"
        "while [ $# -gt 0 ]; do case $1 in -o|-p|-i|-l) shift 2;; -*) shift;; *) break;; esac; done\n"
        "host=$1; shift\n"
        "while [ $# -gt 0 ]; do case $1 in -o|-p|-i|-l) shift 2;; *) break;; esac; done\n"
        f'echo "$host" >> {folder / "calls"}\n'
        "case $host in\n"
        f"{cases}"
        '  *) echo "ssh: Could not resolve hostname $host: Name or service not known" >&2; exit 255;;\n'
        "esac\n"
        'exec ip netns exec "$ns" env -i PATH="$PATH" HOME="$HOME" sh -c "$*"\n'
    )
    ssh.chmod(0o755)
    return ssh


def _hosts(topo: netns.Topology) -> str:
    return "system.hosts=[" + ",".join(topo.address(i) for i in range(topo.num_nodes)) + "]"


def _start(topo: netns.Topology, folder: Path, *overrides: str) -> subprocess.Popen:
    """`ddlbench run` on the first host (in its namespace), with the ssh stand-in first on PATH."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")},
        "PATH": f"{folder}:{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }
    argv = netns.exec_in(topo.node(0), sys.executable, "-m", "ddlbench", "run", _hosts(topo), *TRAIN, *overrides)
    return subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _finish(proc: subprocess.Popen, timeout_s: float = 240) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"ddlbench run across hosts did not end within {timeout_s} s:\n{out[-3000:]}")
    return proc.returncode, out


# a case's framework override brings its component's skip (tests/conftest.py OVERRIDE_NEEDS)
@pytest.mark.parametrize(
    "framework",
    ["framework=ddp", "framework=deepspeed", "framework=horovod"],
)
def test_one_command_on_the_first_host_runs_every_rank(netns_hosts, rank_processes, tmp_path, framework):
    run_dir = tmp_path / "run"
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        _ssh_stand_in(tmp_path, topo)
        code, out = _finish(_start(topo, tmp_path, framework, "run.steps=3", f"run.dir={run_dir}"))
    assert code == 0, out[-3000:]
    assert "10.77.0.2" in (tmp_path / "calls").read_text().split()  # the second host's ranks came over ssh
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["world_size"], summary["num_nodes"]) == ("completed", 2, 2)
    assert sorted(p.name for p in run_dir.glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
    results = subprocess.run(
        [sys.executable, "-m", "ddlbench", "results", str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    # 2 ranks on 2 nodes: one cell, whose settings results prints once above its table
    assert results.returncode == 0 and "ranks (CPU) 2, nodes 2" in results.stdout, results.stdout
    # the report's hosts: the namespaces share this machine's host name, the launcher's nodes tell them apart
    campaign = load_campaign(run_dir)
    hosts = host_times(campaign.steps, campaign.ranks)
    name = socket.gethostname()
    assert list(hosts["host"]) == [f"{name} (node 0)", f"{name} (node 1)"] and list(hosts["ranks"]) == ["0", "1"]


def _rank_pid(run_dir: Path, rank: int) -> int | None:
    """The pid of the training rank `rank` of this run (its environment says RANK, its argv names run_dir)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"run.dir={run_dir}".encode() in argv and f"RANK={rank}".encode() in environ and b"benchmarks" in argv:
            return int(proc.name)
    return None


def test_a_rank_killed_on_the_second_host_fails_the_whole_run(netns_hosts, rank_processes, tmp_path):
    run_dir = tmp_path / "run"
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        _ssh_stand_in(tmp_path, topo)
        proc = _start(topo, tmp_path, "framework=ddp", "run.steps=1000000", f"run.dir={run_dir}")
        deadline, pid = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None:
            if (run_dir / "rank1.jsonl").exists():  # rank 1 trains
                pid = _rank_pid(run_dir, 1)
                if pid:
                    break
            time.sleep(0.2)
        assert pid, "rank 1 never started"
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        code, out = _finish(proc, timeout_s=120)
        took_s = time.monotonic() - started
    assert code != 0, out[-3000:]
    assert took_s < 60, f"the run took {took_s:.0f} s to end after its rank died"
    assert _rank_pid(run_dir, 0) is None  # no rank outlives the run
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed", summary
    results = subprocess.run(
        [sys.executable, "-m", "ddlbench", "results", str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert "failed" in results.stdout + results.stderr
