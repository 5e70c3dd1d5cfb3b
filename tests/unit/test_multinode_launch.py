"""Multi-host launch without Slurm: the exact argv of every launcher across hosts (launchers/programs/
several_hosts), hostfiles written and read, which launchers run on every host, and the one-line errors."""

from __future__ import annotations

import pytest

from benchmarks.errors import ConfigError
from launchers import commbench, local
from launchers.programs import LAUNCHERS, names
from launchers.programs.base import LOCAL, JobShape, RankProgram, training

PY = "/venv/bin/python"
HOSTS = ("10.0.0.1", "10.0.0.2")
PROGRAM = training(["framework=ddp", "run.steps=3"], python=PY)


def shape(node_rank: int = 0, **kw) -> JobShape:
    return local.hosts_shape(
        hosts=HOSTS,
        ranks_per_node=4,
        master_port=29500,
        node_rank=node_rank,
        hostfile="/tmp/hosts",
        as_root=False,
        **kw,
    )


def test_every_local_launcher_starts_ranks_across_hosts():
    assert names(LOCAL) == ["torchrun", "horovodrun", "mpirun", "deepspeed"]
    assert {name for name in names(LOCAL) if LAUNCHERS[name].runs_on_every_host} == {"torchrun", "deepspeed"}
    assert {name for name in names(LOCAL) if LAUNCHERS[name].reads_hostfile} == {"mpirun", "deepspeed"}


def test_torchrun_c10d_rendezvous_exact():
    assert LAUNCHERS["torchrun"].several_hosts(shape(0), PROGRAM) == [
        PY,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.1:29500",
        "--rdzv-id=ddlbench-29500",
        "--rdzv-conf=is_host=1",
        "--local-addr=10.0.0.1",
        "-m",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]
    assert LAUNCHERS["torchrun"].several_hosts(shape(1), PROGRAM) == [
        PY,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=10.0.0.1:29500",
        "--rdzv-id=ddlbench-29500",
        "--rdzv-conf=is_host=0",
        "--local-addr=10.0.0.2",
        "-m",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]


def test_horovodrun_hosts_exact():
    assert LAUNCHERS["horovodrun"].several_hosts(shape(), PROGRAM) == [
        PY,
        "-m",
        "horovod.runner.launch",
        "-np",
        "8",
        "-H",
        "10.0.0.1:4,10.0.0.2:4",
        "--gloo",
        PY,
        "-m",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]


def test_mpirun_hostfile_exact():
    assert LAUNCHERS["mpirun"].several_hosts(shape(mpirun_args=["--mca", "btl", "tcp,self"]), PROGRAM) == [
        "mpirun",
        "-np",
        "8",
        "--hostfile",
        "/tmp/hosts",
        "--map-by",
        "ppr:4:node",
        "--bind-to",
        "none",
        "-x",
        "MASTER_ADDR=10.0.0.1",
        "-x",
        "MASTER_PORT=29500",
        "--mca",
        "btl",
        "tcp,self",
        PY,
        "-m",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]
    as_root = local.hosts_shape(hosts=HOSTS, ranks_per_node=1, master_port=1, hostfile="h", as_root=True)
    assert LAUNCHERS["mpirun"].several_hosts(as_root, PROGRAM)[:4] == ["mpirun", "-np", "2", "--allow-run-as-root"]


def test_deepspeed_without_ssh_exact():
    assert LAUNCHERS["deepspeed"].several_hosts(shape(1), PROGRAM) == [
        PY,
        "-m",
        "deepspeed.launcher.runner",
        "--hostfile=/tmp/hosts",
        "--no_ssh",
        "--node_rank=1",
        "--num_nodes=2",
        "--num_gpus=4",
        "--master_addr=10.0.0.1",
        "--master_port=29500",
        "--no_local_rank",
        "--module",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]


def test_every_host_or_the_first_only():
    for name in names(LOCAL):
        launches = local.hosts_commands(name, shape(), PROGRAM)
        hosts = [host for host, _ in launches]
        assert hosts == (list(HOSTS) if LAUNCHERS[name].runs_on_every_host else ["10.0.0.1"]), name
        assert [argv for _, argv in launches] == [
            LAUNCHERS[name].several_hosts(shape(i), PROGRAM) for i in range(len(hosts))
        ], name
    training_launches = local.hosts_training_commands(
        launcher="torchrun", hosts=HOSTS, ranks_per_node=4, master_port=29500, overrides=["a=1"], as_root=False
    )
    assert [argv[-3:] for _, argv in training_launches] == [["-m", "benchmarks", "a=1"]] * 2


def test_single_host_builders_are_unchanged():
    one = JobShape(nproc=2, master_port=29500)
    assert LAUNCHERS["torchrun"].one_host(one, PROGRAM) == [
        PY,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "--master-port=29500",
        "-m",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]
    assert LAUNCHERS["mpirun"].one_host(one, PROGRAM) == [
        "mpirun",
        "-np",
        "2",
        "--bind-to",
        "none",
        "--oversubscribe",
        PY,
        "-m",
        "benchmarks",
        "framework=ddp",
        "run.steps=3",
    ]


def test_hostfile_written_and_read():
    text = local.hostfile_text(HOSTS, slots=4)
    assert text == "10.0.0.1 slots=4\n10.0.0.2 slots=4\n"
    assert local.parse_hostfile(text) == (list(HOSTS), 4)
    assert local.parse_hostfile("# site\nnode1:2\nnode2:2  # spare\n\n") == (["node1", "node2"], 2)
    assert local.parse_hostfile("node1\nnode2\n") == (["node1", "node2"], None)


@pytest.mark.parametrize(
    "text, message",
    [
        ("node1 slots=2\nnode2 slots=4\n", "--hostfile gives hosts different slots (2, 4); every host runs the same"),
        ("node1\nnode1\n", "--hostfile lists a host twice (node1); give each host once"),
        ("node1 slots=two\n", "--hostfile line 1 'node1 slots=two' is no host line; write '<host> slots=<N>'"),
        ("# nothing\n", "--hostfile lists no host; write one '<host> slots=<N>' line per host"),
    ],
)
def test_bad_hostfiles_say_what_to_write(text, message):
    with pytest.raises(ConfigError) as error:
        local.parse_hostfile(text)
    assert str(error.value).startswith(message)


def test_shape_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"^hosts \['a', 'a'\] must name each host once"):
        local.hosts_shape(hosts=["a", "a"], ranks_per_node=1, master_port=1)
    with pytest.raises(ConfigError, match=r"^--node-rank 2 is not a host of \['a', 'b'\]; give 0..1"):
        local.hosts_shape(hosts=["a", "b"], ranks_per_node=1, master_port=1, node_rank=2)
    no_file = local.hosts_shape(hosts=HOSTS, ranks_per_node=1, master_port=1)
    with pytest.raises(ConfigError, match=r"^mpirun across hosts reads a hostfile and none was given; pass --hostfile"):
        LAUNCHERS["mpirun"].several_hosts(no_file, PROGRAM)


def test_commbench_across_hosts_goes_through_the_same_builders():
    bench = RankProgram(module=commbench.MODULE, args=("--iters", "3"))
    launches = commbench.hosts_commands(
        launcher="torchrun", hosts=HOSTS, nproc_per_host=4, master_port=29500, rank_args=["--iters", "3"]
    )
    assert launches == local.hosts_commands(
        "torchrun", local.hosts_shape(hosts=HOSTS, ranks_per_node=4, master_port=29500), bench
    )


def test_commbench_cli_across_hosts(tmp_path, cli):
    out = tmp_path / "c.json"
    done = cli("commbench", "--hosts", "10.0.0.1,10.0.0.2", "--nproc", "1", "--out", str(out), "--dry-run")
    assert done.returncode == 2 and "torchrun runs on every host: pass --node-rank 0..1" in done.stderr
    done = cli(
        "commbench", "--hosts", "10.0.0.1,10.0.0.2", "--nproc", "1", "--node-rank", "1", "--out", str(out), "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    assert (
        "--rdzv-endpoint=10.0.0.1:29500 --rdzv-id=ddlbench-29500 --rdzv-conf=is_host=0 --local-addr=10.0.0.2"
        in done.stdout
    )
    hostfile = tmp_path / "hosts"
    hostfile.write_text("10.0.0.1 slots=2\n10.0.0.2 slots=2\n")
    done = cli("commbench", "--hostfile", str(hostfile), "--backends", "horovod", "--out", str(out), "--dry-run")
    assert done.returncode == 0 and "-np 4 -H 10.0.0.1:2,10.0.0.2:2 --gloo" in done.stdout, done.stderr


def test_a_cpu_runs_ranks_fork_from_torchrun_and_nothing_else_changes():
    """JobShape.fork_ranks (a CPU run): torchrun forks its ranks, which run the rank module's file; a program
    of another interpreter cannot be forked from this one, and the other launchers start fresh ranks."""
    import sys
    from pathlib import Path

    forking = JobShape(nproc=2, master_port=29500, fork_ranks=True)
    here = training(["framework=ddp"])
    argv = LAUNCHERS["torchrun"].one_host(forking, here)
    main_file = str(Path(sys.modules["benchmarks"].__file__).parent / "__main__.py")
    assert argv[-4:] == ["--run-path", "--start-method=fork", main_file, "framework=ddp"]
    assert LAUNCHERS["torchrun"].one_host(forking, PROGRAM) == LAUNCHERS["torchrun"].one_host(
        JobShape(nproc=2, master_port=29500), PROGRAM
    )
    for name in ("mpirun", "horovodrun", "deepspeed"):
        assert LAUNCHERS[name].one_host(forking, here) == LAUNCHERS[name].one_host(
            JobShape(nproc=2, master_port=29500), here
        ), name


def test_only_the_ranks_of_a_one_thread_cpu_run_fork(compose):
    """...on a machine without a GPU driver (ranks_may_fork says why)."""
    import launchers.local
    from launchers.local import ranks_may_fork

    assert ranks_may_fork(compose(["system=local_cpu"])) is not launchers.local.gpu_driver()
    assert not ranks_may_fork(compose(["system=local_cpu", "system.cpus_per_rank=2"]))  # OpenMP's pool
    assert not ranks_may_fork(compose(["system=h200"]))  # CUDA
