"""The launchers (launchers/programs/): the package's files are the only list of them, every one builds in
each scope it serves, an unknown name says which exist, any rank program (training, commbench) goes
through the same argv, and each reads its own variables on the rank side."""

from __future__ import annotations

import ast
import textwrap

import pytest

from benchmarks.commbench import BACKENDS
from benchmarks.distenv import from_environ
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import FrameworkConfig
from benchmarks.schema import SystemConfig
from launchers import commbench, local, netns, programs, slurm
from launchers.programs import LAUNCHERS, LOCAL, SLURM, LocalLauncher, SlurmLauncher, names
from launchers.programs.base import JobShape, RankProgram, training
from tests.conftest import REPO

PY = "/venv/bin/python"
SHAPE = JobShape(nproc=4, num_nodes=2, master_port=29500, cpus_per_rank=2, mpi="pmix")
BUILDERS = {LOCAL: "one_host", SLURM: "in_allocation"}  # the argv a scope's config key asks a launcher for


def _argv(name: str, key: str, shape: JobShape, program: RankProgram) -> list[str]:
    return getattr(programs.get(name, key), BUILDERS[key])(shape, program)


def test_the_launchers_are_the_package_files_and_the_config_keys_take_theirs():
    files = sorted(p.stem for p in (REPO / "launchers" / "programs").glob("*.py") if p.stem not in ("__init__", "base"))
    assert sorted(LAUNCHERS) == files
    assert names(LOCAL) == ["torchrun", "horovodrun", "mpirun", "deepspeed"]
    assert names(SLURM) == ["mpirun", "srun"]
    assert [m.value for m in LocalLauncher] == names(LOCAL) and [m.value for m in SlurmLauncher] == names(SLURM)
    assert FrameworkConfig.__dataclass_fields__["local_launcher"].type in ("LocalLauncher", LocalLauncher)
    assert SystemConfig.__dataclass_fields__["launcher"].type in ("SlurmLauncher", SlurmLauncher)


def test_no_other_module_lists_the_launchers():
    """A name list of launchers anywhere else would go stale when one is added: no tuple, list or set literal
    outside launchers/programs/ holds three or more launcher names."""
    known = set(LAUNCHERS)
    found = []
    for package in ("benchmarks", "launchers", "analysis", "ddlbench"):
        for path in (REPO / package).rglob("*.py"):
            if path.parent.name == "programs":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    values = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                    if len(values & known) >= 3:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found


def test_a_new_launcher_is_one_file(tmp_path, monkeypatch):
    (tmp_path / "echo.py").write_text(
        textwrap.dedent(
            """
            from launchers.programs.base import LOCAL, Launcher, Probe

            class Echo(Launcher):
                name = "echo"
                scopes = frozenset({LOCAL})
                order = 9
                probe = Probe("program", "echo", "apt-get install coreutils")

                def one_host(self, shape, program):
                    return ["echo", str(shape.nproc), *program.argv()]

            LAUNCHER = Echo()
            """
        )
    )
    monkeypatch.setattr(programs, "__path__", [*programs.__path__, str(tmp_path)])
    monkeypatch.setattr(programs, "LAUNCHERS", programs._found())
    assert names(LOCAL)[-1] == "echo"
    assert _argv("echo", LOCAL, JobShape(nproc=3), training(["a=1"], python="py")) == [
        "echo",
        "3",
        "py",
        "-m",
        "benchmarks",
        "a=1",
    ]


@pytest.mark.parametrize("key", [LOCAL, SLURM])
def test_every_launcher_builds_in_each_of_its_scopes(key):
    program = training(["framework=ddp", "run.steps=3"], python=PY)
    for name in names(key):
        argv = _argv(name, key, SHAPE, program)
        assert all(isinstance(a, str) for a in argv), (name, argv)
        assert argv[-3:] == ["benchmarks", "framework=ddp", "run.steps=3"], (name, argv)


@pytest.mark.parametrize(
    "key, message",
    [
        (LOCAL, "framework.local_launcher='pbs' is unknown; choose torchrun, horovodrun, mpirun or deepspeed"),
        (SLURM, "system.launcher='pbs' is unknown; choose mpirun or srun"),
    ],
)
def test_an_unknown_name_lists_the_launchers_of_that_key(key, message):
    with pytest.raises(ConfigError) as error:
        programs.get("pbs", key)
    assert str(error.value) == message


def test_local_and_commbench_commands_go_through_the_launchers():
    with pytest.raises(ConfigError, match=r"^framework.local_launcher='pbs' is unknown; choose torchrun, "):
        local.local_command(launcher="pbs", nproc=2, master_port=1, overrides=[])
    with pytest.raises(ConfigError, match=r"^commbench launcher='pbs' is unknown; choose torchrun, "):
        commbench.commbench_command(launcher="pbs", nproc=2, master_port=1, rank_args=[])
    with pytest.raises(ConfigError, match=r"^system.launcher='torchrun' is unknown; choose mpirun or srun"):
        slurm.step_command(
            {"launcher": "torchrun", "cpus_per_rank": 1, "mpi": None, "cpu_bind": None, "mpirun_args": []},
            ntasks=2,
            ntasks_per_node=2,
            overrides=[],
        )


def test_local_deepspeed_exact():
    """(torchrun's and mpirun's one-host argv: tests/unit/test_multinode_launch.py)"""
    program = training(["framework=deepspeed"], python=PY)
    shape = JobShape(nproc=2, master_port=29500)
    assert LAUNCHERS["deepspeed"].one_host(shape, program) == [
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


@pytest.mark.parametrize("key", [LOCAL, SLURM])
def test_the_commbench_rank_program_uses_the_same_argv(key):
    """Only the program differs: the launcher's part of the argv is the same, the program's is its own."""
    train = training(["a=1"], python=PY)
    bench = RankProgram(module=commbench.MODULE, args=("--out", "x.json"), python=PY)
    for name in names(key):
        t, b = _argv(name, key, SHAPE, train), _argv(name, key, SHAPE, bench)
        cut_t, cut_b = t.index("benchmarks"), b.index("benchmarks.commbench")
        assert t[:cut_t] == b[:cut_b], name
        assert (t[cut_t + 1 :], b[cut_b + 1 :]) == (["a=1"], ["--out", "x.json"]), name


def test_commbench_command_is_the_launchers_argv():
    shape = local.local_shape(nproc=2, master_port=7, as_root=False)
    for launcher in ("torchrun", "horovodrun"):
        assert commbench.commbench_command(
            launcher=launcher, nproc=2, master_port=7, rank_args=["--iters", "3"]
        ) == LAUNCHERS[launcher].one_host(shape, commbench.rank_program(["--iters", "3"]))


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
    assert netns.exec_in("ns", *LAUNCHERS["mpirun"].one_host(JobShape(nproc=2), bench))[:6] == [
        "ip",
        "netns",
        "exec",
        "ns",
        "mpirun",
        "-np",
    ]


def test_every_commbench_backend_has_a_launcher():
    assert set(commbench.BACKEND_LAUNCHERS) == set(BACKENDS)
    assert set(commbench.BACKEND_LAUNCHERS.values()) <= set(names(LOCAL))
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


@pytest.mark.parametrize(
    "environ, source",
    [
        ({"RANK": "1", "WORLD_SIZE": "2"}, "torchrun"),
        ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_SIZE": "2"}, "torchrun"),  # DeepSpeed's launcher
        ({"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}, "horovodrun"),
        ({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "SLURM_PROCID": "0"}, "openmpi"),
        ({"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "PMIX_RANK": "1", "PMIX_SIZE": "2"}, "slurm"),
        ({"PMIX_RANK": "1", "PMIX_SIZE": "2"}, "pmix"),
        ({}, "single"),
    ],
)
def test_each_launcher_reads_its_own_variables_in_order(environ, source):
    env = from_environ(environ)
    assert env.source == source
    assert (env.rank, env.world_size) == ((0, 1) if source == "single" else (1, 2))
