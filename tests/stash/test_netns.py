"""Emulated nodes: exact argvs (no root needed), and on a machine that permits it, 2 CPU ranks in 2
namespaces: a 100 Mbit/s link makes steps slower than an unshaped one; every namespace is gone
afterwards, also when a rank fails."""

from __future__ import annotations

import json
import time

import pytest

from benchmarks.errors import ConfigError
from launchers import netns


def test_setup_and_teardown_argv():
    topo = netns.Topology(tag="abc", num_nodes=2, link=netns.Link(rate_mbit=100))
    cmds = netns.setup_commands(topo)
    assert cmds[0] == ["ip", "netns", "add", "ddlb-abc-hub"]
    assert [
        "ip",
        "netns",
        "exec",
        "ddlb-abc-hub",
        "ip",
        "link",
        "add",
        "b1",
        "type",
        "veth",
        "peer",
        "name",
        "veth0",
        "netns",
        "ddlb-abc-n1",
    ] in cmds
    assert ["ip", "netns", "exec", "ddlb-abc-n1", "ip", "addr", "add", "10.77.0.2/24", "dev", "veth0"] in cmds
    assert [
        "ip",
        "netns",
        "exec",
        "ddlb-abc-n0",
        "tc",
        "qdisc",
        "add",
        "dev",
        "veth0",
        "root",
        "tbf",
        "rate",
        "100mbit",
        "burst",
        "125000",
        "latency",
        "50ms",
    ] in cmds
    assert netns.teardown_commands(topo.namespaces) == [
        ["ip", "netns", "delete", ns] for ns in ("ddlb-abc-hub", "ddlb-abc-n0", "ddlb-abc-n1")
    ]
    delayed = netns.Topology(tag="abc", num_nodes=1, link=netns.Link(rate_mbit=100, delay_ms=2))
    assert netns.shaping_commands(delayed, 0, netem=True) == [
        [
            "ip",
            "netns",
            "exec",
            "ddlb-abc-n0",
            "tc",
            "qdisc",
            "add",
            "dev",
            "veth0",
            "root",
            "netem",
            "delay",
            "2ms",
            "rate",
            "100mbit",
        ]
    ]
    with pytest.raises(ConfigError, match="stash.net_latency_ms=2 needs the kernel's sch_netem"):
        netns.shaping_commands(delayed, 0, netem=False)
    assert netns.setup_commands(netns.Topology(tag="u", num_nodes=1, link=netns.Link()))[-1][-3:] == [
        "set",
        "veth0",
        "up",
    ]


def test_rank_env_and_command():
    topo = netns.Topology(tag="abc", num_nodes=2, link=netns.Link())
    env = netns.rank_env(topo, rank=3, world_size=4, ranks_per_node=2, master_port=29400)
    assert env == {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "10.77.0.1",
        "MASTER_PORT": "29400",
        "GLOO_SOCKET_IFNAME": "veth0",
        "NCCL_SOCKET_IFNAME": "veth0",
    }
    assert netns.rank_command(topo, rank=3, ranks_per_node=2, overrides=["model=simple_cnn"], python="py") == [
        "ip",
        "netns",
        "exec",
        "ddlb-abc-n1",
        "py",
        "-m",
        "benchmarks",
        "model=simple_cnn",
    ]


def _run(tmp_path, name, link):
    run_dir = tmp_path / name
    with netns.Emulation(num_nodes=2, link=link) as topo:
        code = netns.run_ranks(
            topo,
            world_size=2,
            ranks_per_node=1,
            master_port=29511,
            env={"OMP_NUM_THREADS": "1"},
            timeout_s=300,
            overrides=[
                "model=simple_cnn",
                "model.num_classes=10000",  # 1.3 MB of gradients per step
                "run.steps=5",
                "run.warmup_steps=2",
                "run.per_gpu_batch=4",
                "run.log_every=0",
                "system.ranks_per_node=1",
                f"run.dir={run_dir}",
            ],
        )
        namespaces = topo.namespaces
    assert code == 0
    assert not set(namespaces) & set(netns.list_namespaces())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["num_nodes"] == 2
    return summary["wall_s"] / summary["measured_steps"]


def test_shaped_link_slows_steps(netns_hosts, rank_processes, tmp_path):
    unshaped = _run(tmp_path, "unshaped", netns.Link())
    shaped = _run(tmp_path, "shaped", netns.Link(rate_mbit=100))
    # 1.3 MB each way per step at 12.5 MB/s is >= 0.1 s; unshaped veth moves it in milliseconds
    assert shaped > 0.08 and shaped > 2 * unshaped, (shaped, unshaped)


def test_failed_rank_stops_the_others_and_everything_is_deleted(netns_hosts, rank_processes, tmp_path):
    fake = tmp_path / "rank.sh"  # stands in for python: rank 1 fails at once, rank 0 would wait a minute
    fake.write_text('#!/bin/sh\nif [ "$RANK" = 1 ]; then exit 3; fi\nsleep 60\n')
    fake.chmod(0o755)
    start = time.monotonic()
    with netns.Emulation(num_nodes=2, link=netns.Link(rate_mbit=100)) as topo:
        namespaces = topo.namespaces
        assert set(namespaces) <= set(netns.list_namespaces())
        code = netns.run_ranks(topo, world_size=2, ranks_per_node=1, master_port=29512, overrides=[], python=str(fake))
    assert code == 3 and time.monotonic() - start < 30
    assert not set(namespaces) & set(netns.list_namespaces())


def test_exception_inside_the_emulation_deletes_it(netns_hosts):
    with pytest.raises(RuntimeError, match="boom"):
        with netns.Emulation(num_nodes=3, link=netns.Link()) as topo:
            namespaces = topo.namespaces
            raise RuntimeError("boom")
    assert not set(namespaces) & set(netns.list_namespaces())


def test_netns_clean_deletes_leftovers(netns_hosts, ddlbench):
    emulation = netns.Emulation(num_nodes=1, link=netns.Link())
    topo = emulation.__enter__()  # a session killed before its teardown
    assert set(topo.namespaces) <= set(netns.list_namespaces())
    assert (netns.NETNS_ETC / topo.node(0) / "hosts").is_file()  # the host's own name resolves to its address
    done = ddlbench("stash", "netns-clean")
    assert done.returncode == 0 and topo.hub in done.stdout
    assert not set(topo.namespaces) & set(netns.list_namespaces())
    assert not (netns.NETNS_ETC / topo.node(0)).exists()
