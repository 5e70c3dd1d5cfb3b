"""`ddlbench run` across hosts without a scheduler (launchers/hosts.py): where the hosts come from, the checks
that answer in one line before anything starts (an ssh stand-in on PATH plays the other host), and what is
launched: the launcher itself where it starts every host, else the fan-out with each host's command.
tests/stash/test_run_hosts_netns.py runs it for real on two namespace hosts."""

from __future__ import annotations

import json
import sys

import pytest
from omegaconf import OmegaConf

from benchmarks.errors import ConfigError
from launchers import hosts

SYSTEM = {"ranks_per_node": 2, "hosts": [], "hostfile": None}


def system(**kw):
    return OmegaConf.create({**SYSTEM, **kw})


def test_the_hosts_come_from_the_list_or_the_hostfile(tmp_path):
    assert hosts.hosts_of(system()) is None
    assert hosts.hosts_of(system(hosts=["a", "b"])) == hosts.Hosts(("a", "b"))
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# two nodes\nnode1 slots=2\nnode2 slots=2\n")
    assert hosts.hosts_of(system(hostfile=str(hostfile))) == hosts.Hosts(("node1", "node2"), str(hostfile))


@pytest.mark.parametrize(
    ("settings", "text", "message"),
    [
        ({"hosts": ["a"], "hostfile": "HF"}, None, "system.hosts and system.hostfile both name the hosts"),
        ({"hostfile": "HF"}, "a\nb\n", "names no slots; write '<host> slots=<ranks per host>'"),
        ({"hostfile": "HF"}, "a slots=4\nb slots=4\n", "gives slots=4 but system.ranks_per_node=2; set"),
        ({"hostfile": "HF/missing"}, None, "cannot be read (Not a directory)"),
        ({"hosts": ["a", "b;rm"]}, None, "system.hosts: 'b;rm' is no host name or address"),
        ({"hosts": ["a", "a"]}, None, "names a host twice"),
    ],
)
def test_bad_hosts_are_one_line_errors(tmp_path, settings, text, message):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(text or "a slots=2\n")
    settings = {k: v.replace("HF", str(hostfile)) if isinstance(v, str) else v for k, v in settings.items()}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        hosts.hosts_of(system(**settings))
    assert "\n" not in str(raised.value)


@pytest.fixture
def ssh_answers(tmp_path, monkeypatch):
    """An ssh on PATH that answers every command with the exit code given (255: as ssh unable to connect)."""

    def answer(code: int) -> None:
        ssh = tmp_path / "ssh"
        said = "ssh: connect to host b port 22: Connection refused" if code == 255 else ""
        ssh.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit {code}\n")
        ssh.chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")

    return answer


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (255, "host b cannot be reached over ssh (ssh: connect to host b port 22: Connection refused); ddlbench "
         "starts its ranks with `ssh b`: make `ssh b true` work without a password"),
        (11, "host b has no folder"),
        (12, f"host b has no {sys.executable}: install the same environment at the same path on every host"),
        (13, "does not see"),
    ],
)  # fmt: skip
def test_every_other_host_is_asked_before_anything_starts(tmp_path, ssh_answers, code, message):
    ssh_answers(code)
    with pytest.raises(ConfigError) as raised:
        hosts.check(hosts.Hosts(("localhost", "b")), run_dir=tmp_path / "runs" / "x")
    assert message in str(raised.value)
    ssh_answers(0)
    hosts.check(hosts.Hosts(("localhost", "b")), run_dir=tmp_path / "runs" / "x")


def test_the_first_host_must_be_this_machine(tmp_path):
    assert hosts.is_this_machine("localhost") and hosts.is_this_machine("127.0.0.1")
    assert not hosts.is_this_machine("192.0.2.1")  # TEST-NET-1: never an address of a machine
    with pytest.raises(ConfigError, match=r"system.hosts\[0\]=192.0.2.1 is not this machine: run `ddlbench run` on"):
        hosts.check(hosts.Hosts(("192.0.2.1", "localhost")), run_dir=tmp_path)


def test_torchrun_on_every_host_goes_through_the_fan_out(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/src")
    launch = hosts.plan(
        hosts.Hosts(("n1", "n2")),
        launcher="torchrun",
        ranks_per_node=2,
        master_port=29500,
        overrides=["framework=ddp"],
        run_dir=tmp_path,
        env={"OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "ib0"},
    )
    assert launch.argv[:3] == [sys.executable, "-m", "launchers.hosts"] and launch.hostfile is None
    spec = json.loads(launch.argv[3])
    assert [item["host"] for item in spec["launches"]] == ["n1", "n2"]
    assert spec["env"] == {"PYTHONPATH": "/src", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "ib0"}
    # what the user is shown: the first host's torchrun here, the second's over ssh with the forwarded env
    (first, here), (second, there) = launch.shown
    assert (first, second) == ("n1", "n2")
    assert here.startswith(f"{sys.executable} -m torch.distributed.run --nnodes=2 --nproc-per-node=2")
    assert there.startswith("ssh -o BatchMode=yes n2 'cd ")
    assert "exec env PYTHONPATH=/src OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=ib0" in there


def test_deepspeed_gets_a_hostfile_and_horovodrun_the_interfaces(tmp_path):
    common = dict(ranks_per_node=2, master_port=29500, overrides=["x=1"], run_dir=tmp_path)
    deepspeed = hosts.plan(hosts.Hosts(("n1", "n2")), launcher="deepspeed", env={}, **common)
    assert deepspeed.hostfile == (tmp_path / "hostfile", "n1 slots=2\nn2 slots=2\n")
    assert f"--hostfile={tmp_path / 'hostfile'}" in json.loads(deepspeed.argv[3])["launches"][1]["argv"]
    horovod = hosts.plan(hosts.Hosts(("n1", "n2")), launcher="horovodrun", env={"GLOO_SOCKET_IFNAME": "ib0"}, **common)
    assert horovod.argv[2:10] == [
        "horovod.runner.launch",
        "-np",
        "4",
        "-H",
        "n1:2,n2:2",
        "--network-interfaces",
        "ib0",
        "--gloo",
    ]
    assert horovod.shown == [("n1", " ".join(horovod.argv))]


def test_a_one_process_framework_cannot_span_hosts(cli):
    proc = cli("run", "framework=dp", "system.hosts=[localhost,b]", "--dry-run")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ddlbench: error: framework=dp drives every GPU of a host from one process and cannot span system.hosts; "
        "use framework=ddp across hosts"
    )
