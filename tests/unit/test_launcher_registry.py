"""The launcher registries: every name builds, an unknown name says which exist, and any rank program
(training, commbench) goes through the same builders."""

from __future__ import annotations

import pytest

from benchmarks.commbench import BACKENDS
from benchmarks.errors import ConfigError
from launchers import commbench, local, netns, slurm
from launchers.registry import JobShape, RankProgram, Registry, training

PY = "/venv/bin/python"
SHAPE = JobShape(nproc=4, num_nodes=2, master_port=29500, cpus_per_rank=2, mpi="pmix")
SCOPES = [pytest.param(local.LAUNCHERS, id="local"), pytest.param(slurm.LAUNCHERS, id="slurm")]


def test_the_registered_names():
    assert local.LAUNCHERS.names() == ["torchrun", "horovodrun", "mpirun", "deepspeed"]
    assert slurm.LAUNCHERS.names() == ["srun", "mpirun"]


@pytest.mark.parametrize("registry", SCOPES)
def test_every_registered_name_builds(registry):
    program = training(["framework=ddp", "run.steps=3"], python=PY)
    for name in registry.names():
        argv = registry.build(name, SHAPE, program)
        assert all(isinstance(a, str) for a in argv), (name, argv)
        assert argv[-3:] == ["benchmarks", "framework=ddp", "run.steps=3"], (name, argv)


@pytest.mark.parametrize(
    "registry, message",
    [
        (
            local.LAUNCHERS,
            "framework.local_launcher='pbs' is unknown; choose torchrun, horovodrun, mpirun or deepspeed",
        ),
        (slurm.LAUNCHERS, "system.launcher='pbs' is unknown; choose srun or mpirun"),
    ],
)
def test_an_unknown_name_lists_the_registered_ones(registry, message):
    with pytest.raises(ConfigError) as error:
        registry.build("pbs", SHAPE, training([]))
    assert str(error.value) == message


def test_local_command_goes_through_the_registry():
    with pytest.raises(ConfigError, match=r"^framework.local_launcher='pbs' is unknown; choose torchrun, "):
        local.local_command(launcher="pbs", nproc=2, master_port=1, overrides=[])
    with pytest.raises(ConfigError, match=r"^commbench launcher='pbs' is unknown; choose torchrun, "):
        commbench.commbench_command(launcher="pbs", nproc=2, master_port=1, rank_args=[])


def test_local_torchrun_and_deepspeed_exact():
    program = training(["framework=deepspeed"], python=PY)
    shape = JobShape(nproc=2, master_port=29500)
    assert local.torchrun(shape, program) == [
        PY,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "--master-port=29500",
        "-m",
        "benchmarks",
        "framework=deepspeed",
    ]
    assert local.deepspeed(shape, program) == [
        PY,
        "-m",
        "deepspeed.launcher.runner",
        "--num_gpus=2",
        "--master_port=29500",
        "--no_local_rank",
        "--module",
        "benchmarks",
        "framework=deepspeed",
    ]


@pytest.mark.parametrize("registry", SCOPES)
def test_the_commbench_rank_program_uses_the_same_builders(registry):
    """Only the program differs: the launcher's part of the argv is the same, the program's is its own."""
    train = training(["a=1"], python=PY)
    bench = RankProgram(module=commbench.MODULE, args=("--out", "x.json"), python=PY)
    for name in registry.names():
        t, b = registry.build(name, SHAPE, train), registry.build(name, SHAPE, bench)
        cut_t, cut_b = t.index("benchmarks"), b.index("benchmarks.commbench")
        assert t[:cut_t] == b[:cut_b], name
        assert (t[cut_t + 1 :], b[cut_b + 1 :]) == (["a=1"], ["--out", "x.json"]), name


def test_commbench_command_is_a_registered_builder():
    shape = local.local_shape(nproc=2, master_port=7, as_root=False)
    for launcher in ("torchrun", "horovodrun"):
        assert commbench.commbench_command(
            launcher=launcher, nproc=2, master_port=7, rank_args=["--iters", "3"]
        ) == local.LAUNCHERS.build(launcher, shape, commbench.rank_program(["--iters", "3"]))


def test_the_netns_wrapper_runs_any_program():
    topo = netns.Topology(tag="abc", num_nodes=2, link=netns.Link())
    bench = RankProgram(module=commbench.MODULE, args=("--out", "x.json"), python="py")
    assert netns.rank_argv(topo, bench, rank=2, ranks_per_node=2) == [
        "ip",
        "netns",
        "exec",
        "ddlb-abc-n1",
        "py",
        "-m",
        "benchmarks.commbench",
        "--out",
        "x.json",
    ]
    assert netns.exec_in("ns", *local.mpirun(JobShape(nproc=2), bench))[:6] == [
        "ip",
        "netns",
        "exec",
        "ns",
        "mpirun",
        "-np",
    ]


def test_every_commbench_backend_has_a_registered_launcher():
    assert set(commbench.BACKEND_LAUNCHERS) == set(BACKENDS)
    assert set(commbench.BACKEND_LAUNCHERS.values()) <= set(local.LAUNCHERS.names())
    assert commbench.launcher_for(["torch", "deepspeed"]) == "torchrun"
    assert commbench.launcher_for(["horovod"]) == "horovodrun"
    assert commbench.launcher_for(["mpi"]) == "mpirun"


@pytest.mark.parametrize(
    "backends, message",
    [
        (
            ["torch", "horovod"],
            "--backends torch,horovod: started by different launchers (torch by torchrun, horovod by "
            "horovodrun); run them apart: --backends torch and --backends horovod",
        ),
        (["torch", "nccl"], "--backends torch,nccl: 'nccl' is unknown; choose from torch, deepspeed, horovod, mpi"),
    ],
)
def test_commbench_backends_that_no_one_launcher_starts(backends, message):
    with pytest.raises(ConfigError) as error:
        commbench.launcher_for(backends)
    assert str(error.value) == message


def test_a_new_builder_is_one_registration():
    registry = Registry(key="x.launcher")

    @registry.register("echo")
    def echo(shape: JobShape, program: RankProgram, /) -> list[str]:
        return ["echo", str(shape.nproc), *program.argv()]

    assert registry.build("echo", JobShape(nproc=3), training(["a=1"], python="py")) == [
        "echo",
        "3",
        "py",
        "-m",
        "benchmarks",
        "a=1",
    ]
    with pytest.raises(ConfigError, match=r"^x.launcher='mpi' is unknown; choose echo$"):
        registry.get("mpi")
