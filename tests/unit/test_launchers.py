"""Launch command builders: exact argvs, and no override can smuggle shell code into one."""

from __future__ import annotations

import re
import shlex
import sys

import pytest

from benchmarks.config import compose
from benchmarks.errors import ConfigError
from launchers import campaign, code_origin, slurm, submit
from launchers.programs import LAUNCHERS
from launchers.programs.base import JobShape, training

PY = "/venv/bin/python"

# the submitting checkout's code for the job (launchers/code_origin.py), after sbatch's own exports
CODE = "".join(f",{k}={v}" for k, v in code_origin.launch_environment().items())


@pytest.fixture(scope="module")
def slurm_cpu():
    return compose(["system=slurm_cpu"]).system


@pytest.fixture(scope="module")
def juwels():
    return compose(["system=juwels_booster"]).system


def test_srun_exact():
    argv = LAUNCHERS["srun"].in_allocation(
        JobShape(nproc=8, num_nodes=2, cpus_per_rank=12, mpi="pmix", cpu_bind="cores"),
        training(["framework=ddp", "model.depth=50"], python=PY),
    )
    assert argv == [
        "srun",
        "--mpi=pmix",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--cpus-per-task=12",
        "--kill-on-bad-exit=1",
        "--cpu-bind=cores",
        PY,
        "-m",
        "benchmarks",
        "framework=ddp",
        "model.depth=50",
    ]


def test_step_command_from_profile(slurm_cpu, juwels):
    assert slurm.step_command(slurm_cpu, ntasks=2, ntasks_per_node=2, overrides=["loader=synthetic"], python=PY) == [
        "srun",
        "--mpi=pmix",
        "--ntasks=2",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "--kill-on-bad-exit=1",
        PY,
        "-m",
        "benchmarks",
        "loader=synthetic",
    ]
    assert slurm.step_command(juwels, ntasks=16, ntasks_per_node=4, overrides=[], python=PY)[:6] == [
        "srun",
        "--mpi=pspmix",
        "--ntasks=16",
        "--ntasks-per-node=4",
        "--cpus-per-task=12",
        "--kill-on-bad-exit=1",
    ]


def test_mpirun_in_allocation_exact():
    argv = LAUNCHERS["mpirun"].in_allocation(
        JobShape(nproc=8, num_nodes=2, mpirun_args=("-x", "NCCL_DEBUG")), training(["framework=horovod"], python=PY)
    )
    assert argv[:2] == ["mpirun", "-np"] and argv[2] == "8"
    tail = argv[argv.index("--map-by") :]
    assert tail == ["--map-by", "ppr:4:node", "-x", "NCCL_DEBUG", PY, "-m", "benchmarks", "framework=horovod"]


def test_step_command_mpirun_from_profile(slurm_cpu):
    system = {**slurm_cpu, "launcher": "mpirun", "mpirun_args": ["--report-bindings"]}
    argv = slurm.step_command(system, ntasks=2, ntasks_per_node=2, overrides=["framework=horovod"], python=PY)
    assert argv[0] == "mpirun" and argv[-5:] == ["--report-bindings", PY, "-m", "benchmarks", "framework=horovod"]


def test_unknown_launcher_is_one_line(slurm_cpu):
    with pytest.raises(ConfigError, match=r"^system.launcher='pbs' is unknown; choose mpirun or srun$"):
        slurm.step_command({**slurm_cpu, "launcher": "pbs"}, ntasks=1, ntasks_per_node=1, overrides=[])


def test_sbatch_exact():
    argv = slurm.sbatch(
        overrides=["system=juwels_booster", "framework=horovod"],
        nodes=4,
        ntasks_per_node=4,
        cpus_per_task=12,
        gpus_per_node=4,
        partition="booster",
        account="proj1",
        time_limit="00:30:00",
        job_name="ddlbench/c/x",
        output="runs/c/slurm/x-%j.out",
        extra=["--constraint=a100"],
        export={"DDLBENCH_PYTHON": PY},
        script="slurm/run.sh",
    )
    assert argv == [
        "sbatch",
        "--parsable",
        "--nodes=4",
        "--ntasks-per-node=4",
        "--cpus-per-task=12",
        "--gres=gpu:4",
        "--partition=booster",
        "--account=proj1",
        "--time=00:30:00",
        "--job-name=ddlbench/c/x",
        "--output=runs/c/slurm/x-%j.out",
        f"--export=ALL,DDLBENCH_PYTHON={PY}",
        "--constraint=a100",
        "slurm/run.sh",
        "system=juwels_booster",
        "framework=horovod",
    ]


def test_sbatch_minimal():
    assert slurm.sbatch(overrides=[], nodes=1, ntasks_per_node=2, cpus_per_task=1, script="run.sh") == [
        "sbatch",
        "--parsable",
        "--nodes=1",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "run.sh",
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "run.campaign=x;rm -rf ~",
        "run.campaign=$(reboot)",
        "run.campaign=`id`",
        "data.path=a'b",
        'data.path=a"b',
        "run.campaign=a|b",
        "run.campaign=a&b",
        "data.path=a>b",
        "data.path=a\nb",
        "x;y=1",
    ],
)
def test_injection_in_an_override_is_rejected(bad, slurm_cpu):
    for build in (
        lambda: slurm.step_command(slurm_cpu, ntasks=1, ntasks_per_node=1, overrides=[bad]),
        lambda: slurm.step_command({**slurm_cpu, "launcher": "mpirun"}, ntasks=1, ntasks_per_node=1, overrides=[bad]),
        lambda: slurm.sbatch(overrides=[bad], nodes=1, ntasks_per_node=1, cpus_per_task=1),
    ):
        with pytest.raises(ConfigError) as error:
            build()
        message = str(error.value)
        assert len(message.splitlines()) == 1
        assert "not allowed" in message or "not key=value" in message


def test_a_space_stays_one_argument():
    # spaces are allowed in values (Hydra's grammar); the argv keeps the override one word
    argv = slurm.sbatch(
        overrides=["data.path=/data/my images"], nodes=1, ntasks_per_node=1, cpus_per_task=1, script="run.sh"
    )
    assert argv[-1] == "data.path=/data/my images"
    assert shlex.split(shlex.join(argv)) == argv


def test_export_with_a_comma_is_refused():
    with pytest.raises(ConfigError, match="cannot be passed through --export"):
        slurm.sbatch(overrides=[], nodes=1, ntasks_per_node=1, cpus_per_task=1, export={"X": "a,b"})


def test_rendezvous():
    assert slurm.master_addr("jwb[0012-0015,0100]", suffix="i") == "jwb0012i"
    assert slurm.master_addr("vm") == "vm"
    assert slurm.master_port(12345) == 32345
    env = slurm.rank_environment(
        {"PATH": "/bin", "RANK": "3", "WORLD_SIZE": "8"}, system_env={"OMP_NUM_THREADS": "1"}, addr="vm", port=20001
    )
    assert env == {"PATH": "/bin", "OMP_NUM_THREADS": "1", "MASTER_ADDR": "vm", "MASTER_PORT": "20001"}


def test_launch_outside_a_job_is_one_line():
    with pytest.raises(ConfigError, match=r"^not inside a Slurm job \(SLURM_JOB_ID unset\); submit with"):
        slurm.launch(["system=slurm_cpu"], environ={})


def test_launch_dry_run_in_a_fake_allocation(tmp_path, capsys):
    environ = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "vm"}
    code = slurm.launch(["system=slurm_cpu", f"run.root={tmp_path}", "run.campaign=t"], dry_run=True, environ=environ)
    assert code == 0
    captured = capsys.readouterr()
    err, out = captured.err, captured.out  # the job's facts on stderr, a dry run's command on stdout
    assert "MASTER_ADDR=vm MASTER_PORT=20007" in err
    assert re.search(
        rf"run\.dir={re.escape(str(tmp_path))}/t/ddp-synthetic-resnet50-fp32-g4-n1-b32-[0-9a-f]{{8}}-r0(\s|$)", out
    ), out
    assert "srun --mpi=pmix --ntasks=4 --ntasks-per-node=4 --cpus-per-task=1 --kill-on-bad-exit=1" in out


def test_an_array_task_takes_its_line_of_the_cells_file(tmp_path, capsys):
    cells = tmp_path / "cells.jsonl"
    cells.write_text('["system=slurm_cpu", "run.repeat=0"]\n["system=slurm_cpu", "run.repeat=1"]\n')
    environ = {"SLURM_JOB_ID": "9", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "1", "SLURM_ARRAY_TASK_ID": "1"}
    # the options sit between the action and the overrides, as slurm/run.sh passes them
    assert slurm.main(["launch", f"--cells={cells}", "--dry-run", f"run.root={tmp_path}", "run.campaign=t"]) == 2
    assert "(SLURM_ARRAY_TASK_ID unset)" in capsys.readouterr().err  # parsed; this process is no array task
    assert (
        slurm.launch([f"run.root={tmp_path}", "run.campaign=t"], dry_run=True, environ=environ, cells_file=cells) == 0
    )
    out = capsys.readouterr().out
    assert re.search(r"/t/ddp-synthetic-resnet50-fp32-g2-n1-b32-[0-9a-f]{8}-r1(\s|$)", out), out
    with pytest.raises(ConfigError, match=r"has 2 cells but SLURM_ARRAY_TASK_ID=5; submit with --array=0-1$"):
        slurm.array_task_overrides(cells, {"SLURM_ARRAY_TASK_ID": "5"})
    with pytest.raises(ConfigError, match=r"needs a job array task \(SLURM_ARRAY_TASK_ID unset\)"):
        slurm.array_task_overrides(cells, {})


def test_sbatch_of_an_array_passes_the_cells_file_not_overrides():
    argv = slurm.sbatch(
        overrides=[],
        nodes=1,
        ntasks_per_node=2,
        cpus_per_task=1,
        extra=["--array=0-3%2"],
        cells_file="/runs/c/slurm/array-1-n1x2.jsonl",
        script="run.sh",
    )
    assert argv[-3:] == ["--array=0-3%2", "run.sh", "--cells=/runs/c/slurm/array-1-n1x2.jsonl"]
    with pytest.raises(ConfigError, match="not allowed"):
        slurm.sbatch(overrides=[], nodes=1, ntasks_per_node=1, cpus_per_task=1, cells_file="/tmp/a;rm -rf x")


# ---- campaigns (pure planning; submission is tested on the real cluster in tests/slurm) ----


@pytest.mark.parametrize(
    "gpus, expected",
    [
        (1, (1, 1, None)),
        (4, (1, 4, None)),
        (8, (2, 4, None)),
        (1024, (256, 4, None)),
        (6, (0, 0, "6 GPUs do not fill whole nodes of system.ranks_per_node=4")),
        (4096, (1024, 4, "needs 1024 nodes but system.max_nodes=936")),
    ],
)
def test_layout(gpus, expected):
    assert campaign.layout(gpus, ranks_per_node=4, max_nodes=936) == expected


def test_a_cause_every_cell_shares_is_one_reason(monkeypatch):
    monkeypatch.delenv("DDLBENCH_IMAGENET", raising=False)  # data.path unset: every cell reads data
    monkeypatch.delenv("DDLBENCH_IMAGENET_TFRECORD", raising=False)
    _, cells = campaign.plan(["experiment=aach2023_scaling", "system=juwels_booster"])  # planned, not refused
    assert campaign.reasons(cells) == [
        (243, f"loader={loader} reads data but data.path is not set: it reads ${variable}, which is unset; "
         f"export {variable}=<folder> or pass data.path=<folder>")
        for loader, variable in (("dali", "DDLBENCH_IMAGENET_TFRECORD"), ("native", "DDLBENCH_IMAGENET"))
    ]  # fmt: skip


def test_a_single_process_framework_is_planned_on_one_node_only(monkeypatch, tmp_path):
    from benchmarks.data.synth import synth_imagefolder
    from benchmarks.data.tfrecord import synth_tfrecords

    # a step of 4 GPUs at batch 1 in both data sets: the plan checks them too
    size = dict(num_classes=1, images_per_class=4, width=8, height=8, quality=50, seed=0, progress=False)
    synth_imagefolder(tmp_path / "jpegs", **size)
    synth_tfrecords(tmp_path / "tfrecord", **size, num_shards=1)
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(tmp_path / "jpegs"))
    monkeypatch.setenv("DDLBENCH_IMAGENET_TFRECORD", str(tmp_path / "tfrecord"))
    _, cells = campaign.plan(
        ["experiment=aach2023_scaling", "system=juwels_booster", "campaign.axes.framework=[dp]", "campaign.gpus=[4,8]",
         "run.per_gpu_batch=1"]
    )  # fmt: skip
    assert {c.problem for c in cells if c.num_gpus == 4} == {None}
    assert {c.problem for c in cells if c.num_gpus == 8} == {
        "framework=dp drives one node's GPUs from one process; 8 GPUs need 2 nodes"
    }


def test_aach2023_grid_on_juwels(monkeypatch, tmp_path):
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(tmp_path))
    monkeypatch.setenv("DDLBENCH_IMAGENET_TFRECORD", str(tmp_path))
    cfg, cells = campaign.plan(["experiment=aach2023_scaling", "system=juwels_booster"])
    assert len(cells) == 3 * 2 * 3 * 9 * 3
    big = [c for c in cells if c.num_gpus == 1024]
    assert {(c.num_nodes, c.ranks_per_node) for c in big} == {(256, 4)}
    names = {c.name for c in cells}
    assert len(names) == len(cells)  # every cell its own run directory
    for cell in (
        r"horovod-dali-resnet152-fp32-g1024-n256-b64-[0-9a-f]{8}-r2",
        r"ddp-native-resnet50-fp32-g4-n1-b64-[0-9a-f]{8}-r0",
    ):
        assert len([n for n in names if re.fullmatch(cell, n)]) == 1, (cell, sorted(names))


def test_sbatch_command_of_a_cell(monkeypatch, tmp_path):
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    base = ["experiment=aach2023_scaling", "system=juwels_booster", "system.account=proj42", "campaign.gpus=[16]"]
    cfg, cells = campaign.plan(base)
    (cell,) = [c for c in cells if re.fullmatch(r"deepspeed-native-resnet101-fp32-g16-n4-b64-[0-9a-f]{8}-r1", c.name)]
    argv = submit.sbatch_command(cfg, cell, base)
    logs = tmp_path / "runs" / "aach2023_scaling" / "slurm"
    assert argv[:14] == [
        "sbatch",
        "--parsable",
        "--nodes=4",
        "--ntasks-per-node=4",
        "--cpus-per-task=12",
        "--gres=gpu:4",
        "--partition=booster",
        "--account=proj42",
        "--time=00:30:00",
        f"--job-name=ddlbench/aach2023_scaling/{cell.name}",
        f"--output={logs}/{cell.name}-%j.out",
        f"--export=ALL,DDLBENCH_PYTHON={sys.executable},DDLBENCH_PRELUDE={submit.prelude_file(cfg, write=False)}{CODE}",
        f"--chdir={tmp_path}",
        "--exclusive",  # juwels_booster: exclusive: true
    ]
    assert argv[14].endswith("slurm/run.sh")
    assert argv[15:] == [
        "experiment=aach2023_scaling",
        "system=juwels_booster",
        "system.account=proj42",
        "framework=deepspeed",
        "experiment/aach2023_loader@_global_=native",  # the loader with its data set (JPEGs; DALI's: TFRecord)
        "model.depth=101",
        "run.repeat=1",
    ]


def test_impossible_cells_say_why():
    cfg, cells = campaign.plan(["experiment=slurm_smoke", "system=slurm_cpu", "campaign.gpus=[2,6,8]"])
    problems = {c.num_gpus: c.problem for c in cells}
    assert problems == {
        2: None,
        6: "6 GPUs do not fill whole nodes of system.ranks_per_node=4",
        8: "needs 2 nodes but system.max_nodes=1",
    }


def test_launch_takes_cpus_per_task_from_the_allocation(tmp_path, capsys):
    environ = {
        "SLURM_JOB_ID": "8",
        "SLURM_NTASKS": "8",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_CPUS_PER_TASK": "6",
        "SLURM_JOB_NODELIST": "jwb[0012-0013]",
    }
    assert slurm.launch(["system=juwels_booster", f"run.root={tmp_path}"], dry_run=True, environ=environ) == 0
    captured = capsys.readouterr()
    assert "MASTER_ADDR=jwb0012i MASTER_PORT=20008" in captured.err
    assert "srun --mpi=pspmix --ntasks=8 --ntasks-per-node=4 --cpus-per-task=6 --kill-on-bad-exit=1 " in captured.out


def test_launch_refuses_more_ranks_than_gpus(tmp_path):
    environ = {"SLURM_JOB_ID": "9", "SLURM_NTASKS": "8", "SLURM_JOB_NUM_NODES": "1"}
    with pytest.raises(
        ConfigError,
        match=r"^8 ranks per node but system.gpus_per_node=4 \(system=juwels_booster\); "
        r"pass sbatch --ntasks-per-node=4 or fewer$",
    ):
        slurm.launch(["system=juwels_booster", f"run.root={tmp_path}"], dry_run=True, environ=environ)
