"""Multi-host launch without Slurm on two network-namespace "hosts" joined by veth (launchers/netns.py):
each host runs the argv its registered multi-host builder gives (launchers/programs/ several_hosts) inside its
namespace, and the ranks meet over the emulated link only (every address is a namespace's 10.77.0.x)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from launchers import local, netns
from launchers.programs.base import RankProgram, training
from tests.conftest import REPO


def _run_on_hosts(
    topo: netns.Topology, launches: list[tuple[str, list[str]]], *, env: dict[str, str], timeout_s: float
) -> list[int]:
    """Start each (host, argv) in the namespace of that host; stop the others when one fails. Exit codes."""
    by_address = {topo.address(i): i for i in range(topo.num_nodes)}
    procs = []
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    try:
        for host, argv in launches:
            node = by_address[host]
            procs.append(
                subprocess.Popen(
                    netns.exec_in(topo.node(node), *argv),
                    start_new_session=True,
                    env={**base, **env, "GLOO_SOCKET_IFNAME": topo.ifname(node)},
                )
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
                break
            time.sleep(0.2)
        return [p.poll() if p.poll() is not None else 124 for p in procs]
    finally:
        for p in procs:  # a launcher's whole session: torchrun's workers too (by our pids, never by name)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _hosts(topo: netns.Topology) -> list[str]:
    return [topo.address(i) for i in range(topo.num_nodes)]


TRAIN = [
    "model=simple_cnn",
    "run.steps=4",
    "run.warmup_steps=1",
    "run.per_gpu_batch=4",
    "run.log_every=0",
    "system.ranks_per_node=1",
]


def test_torchrun_c10d_rendezvous_trains_ddp_across_two_hosts(netns_hosts, rank_processes, tmp_path):
    run_dir = tmp_path / "ddp-2x1"
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        launches = local.hosts_training_commands(
            launcher="torchrun",
            hosts=_hosts(topo),
            ranks_per_node=1,
            master_port=29541,
            overrides=["framework=ddp", *TRAIN, f"run.dir={run_dir}"],
        )
        assert [host for host, _ in launches] == ["10.77.0.1", "10.77.0.2"]
        codes = _run_on_hosts(topo, launches, env={"OMP_NUM_THREADS": "1"}, timeout_s=300)
        namespaces = topo.namespaces
    assert codes == [0, 0]
    assert not set(namespaces) & set(netns.list_namespaces())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["world_size"], summary["num_nodes"]) == ("completed", 2, 2)
    assert sorted(p.name for p in run_dir.glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]


def test_deepspeed_without_ssh_trains_across_two_hosts(netns_hosts, rank_processes, deepspeed, tmp_path):
    run_dir = tmp_path / "ds-2x1"
    hostfile = tmp_path / "hostfile"
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        hostfile.write_text(local.hostfile_text(_hosts(topo), slots=1))
        shape = local.hosts_shape(hosts=_hosts(topo), ranks_per_node=1, master_port=29542, hostfile=str(hostfile))
        launches = local.hosts_commands(
            "deepspeed", shape, training(["framework=deepspeed", *TRAIN, f"run.dir={run_dir}"])
        )
        codes = _run_on_hosts(topo, launches, env={"OMP_NUM_THREADS": "1"}, timeout_s=300)
    assert codes == [0, 0]
    summary = json.loads((run_dir / "summary.json").read_text())
    # DeepSpeed's launcher exports LOCAL_SIZE (not torchrun's LOCAL_WORLD_SIZE): two hosts of one rank each
    assert (summary["status"], summary["world_size"], summary["num_nodes"]) == ("completed", 2, 2)


def test_commbench_suite_across_two_hosts_checks_every_element(netns_hosts, rank_processes, tmp_path):
    """gloo between the namespaces: every op, both placements, no wrong element."""
    out = tmp_path / "commbench-hosts.json"
    program = RankProgram(
        module="benchmarks.commbench",
        args=(
            "--out",
            str(out),
            "--ops",
            "all",
            "--min-bytes",
            "1024",
            "--max-bytes",
            "4096",
            "--warmup",
            "1",
            "--iters",
            "2",
            "--device",
            "cpu",
        ),
        python=sys.executable,
    )
    with netns.Emulation(num_nodes=2, link=netns.Link(rate_mbit=1000)) as topo:
        shape = local.hosts_shape(hosts=_hosts(topo), ranks_per_node=1, master_port=29543)
        codes = _run_on_hosts(
            topo, local.hosts_commands("torchrun", shape, program), env={"OMP_NUM_THREADS": "1"}, timeout_s=300
        )
    assert codes == [0, 0]
    records = json.loads(out.read_text())
    assert {r["op"] for r in records} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "broadcast",
        "send_recv",
    }
    assert all(r["world_size"] == 2 and r["wrong"] == 0 for r in records)


def test_mpirun_hostfile_runs_the_mpi_suite_across_two_hosts(netns_hosts, rank_processes, tmp_path):
    """mpirun on the first host, the second host's ranks started through OpenMPI's remote-launch agent:
    here `ip netns exec` into that host's namespace instead of ssh (plm_rsh_agent)."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed: run 'make mpi' (pip install 'ddlbench[mpi]')")
    out, calls = tmp_path / "commbench-mpi.json", tmp_path / "agent-calls"
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        agent = tmp_path / "netns-rsh"
        cases = "".join(f"  {topo.address(i)}) ns={topo.node(i)};;\n" for i in range(topo.num_nodes))
        agent.write_text(
            f'#!/bin/sh\nhost=$1; shift\necho "$host" >> {calls}\ncase $host in\n{cases}esac\n'
            'exec ip netns exec "$ns" sh -c "$*"\n'
        )
        agent.chmod(0o755)
        hostfile = tmp_path / "hostfile"
        hostfile.write_text(local.hostfile_text(_hosts(topo), slots=1))
        subnet = f"{netns.SUBNET}.0/24"
        shape = local.hosts_shape(
            hosts=_hosts(topo),
            ranks_per_node=1,
            master_port=29544,
            hostfile=str(hostfile),
            mpirun_args=[
                "--mca",
                "plm_rsh_agent",
                str(agent),
                "--mca",
                "oob_tcp_if_include",
                subnet,
                "--mca",
                "btl_tcp_if_include",
                subnet,
                "-x",
                "PYTHONPATH",
                "-x",
                "OMP_NUM_THREADS",
            ],
        )
        program = RankProgram(
            module="benchmarks.commbench",
            args=(
                "--out",
                str(out),
                "--backends",
                "mpi",
                "--ops",
                "all",
                "--max-bytes",
                "4096",
                "--warmup",
                "1",
                "--iters",
                "2",
            ),
            python=sys.executable,
        )
        launches = local.hosts_commands("mpirun", shape, program)
        assert [host for host, _ in launches] == ["10.77.0.1"]  # one mpirun, on the first host
        codes = _run_on_hosts(topo, launches, env={"OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}, timeout_s=300)
    assert codes == [0]
    assert calls.read_text().split() == ["10.77.0.2"]  # the second host's ranks came through the agent
    records = json.loads(out.read_text())
    assert {(r["backend"], r["world_size"]) for r in records} == {("mpi", 2)}
    assert all(r["wrong"] == 0 for r in records) and len(records) == 6 * 3 * 2 - 3  # no in-place reduce_scatter
