"""`sbatch slurm/run.sh OVERRIDES` on the real local Slurm cluster, CPU ranks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import find_run, run_name_pattern
from tests.slurm.cluster import sbatch, wait_for

SMALL = [
    "system=slurm_cpu",
    "loader=synthetic",
    "model=simple_cnn",
    "model.image_size=32",
    "run.per_gpu_batch=8",
    "run.warmup_steps=1",
    "run.steps=3",
    "run.log_every=0",
]


@pytest.mark.parametrize("framework", ["ddp", "deepspeed", "horovod"])
def test_two_task_run_writes_a_complete_run_directory(slurm_up, tmp_path, framework):
    """Also: a space inside an override's value reaches the ranks' config as given (the synthetic loader
    reads no data.path)."""
    job = sbatch(
        f"framework={framework}",
        *SMALL,
        "data.path=/tmp/my data",
        f"run.root={tmp_path}/runs",
        "run.campaign=t",
        cwd=tmp_path,
    )
    info = wait_for(job)
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", log
    run_dir = find_run(tmp_path / "runs" / "t", f"{framework}-synthetic-simple_cnn-g2-n1-b8-r0")
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.yaml",
        "end_rank0.json",
        "end_rank1.json",
        "interference_rank0.json",  # what else ran on the node in the measured window (docs/reliability.md)
        "meta.json",
        "mllog.txt",
        "owner.json",  # who launched it (launchers/lifecycle/liveness.py)
        "progress_rank0.json",  # each rank's step and phase (launchers/lifecycle/watchdog.py)
        "progress_rank1.json",
        "rank0.jsonl",
        "rank1.jsonl",
        "summary.json",
    ], log
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2 and summary["num_nodes"] == 1
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["launcher"] in ("slurm", "openmpi", "pmix") and meta["world_size"] == 2
    assert "srun --mpi=pmix --ntasks=2 --ntasks-per-node=2" in log
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["data"]["path"] == "/tmp/my data"


@pytest.mark.parametrize(
    "framework",
    [
        # torch.distributed's ranks under mpirun read OpenMPI's variables as DeepSpeed's do in make test
        # (tests/multiproc/test_deepspeed.py, framework.local_launcher=mpirun); the argv is horovod's below
        pytest.param("ddp", marks=pytest.mark.matrix),
        "horovod",
    ],
)
def test_mpirun_launcher_in_the_allocation(slurm_up, tmp_path, framework):
    job = sbatch(
        f"framework={framework}",
        *SMALL,
        "system.launcher=mpirun",
        f"run.root={tmp_path}/runs",
        "run.campaign=t",
        cwd=tmp_path,
    )
    info = wait_for(job)
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] == "COMPLETED", log
    assert "[ddlbench] mpirun -np 2 " in log and "--map-by ppr:2:node" in log
    run_dir = find_run(tmp_path / "runs" / "t", f"{framework}-synthetic-simple_cnn-g2-n1-b8-r0")
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    assert json.loads((run_dir / "meta.json").read_text())["launcher"] == "openmpi"


def test_a_failing_rank_fails_the_job(slurm_up, tmp_path):
    job = sbatch(
        "framework=ddp",
        *[o for o in SMALL if not o.startswith("run.steps")],
        "run.steps=1000000",
        f"run.root={tmp_path}/runs",
        "run.campaign=t",
        cwd=tmp_path,
    )
    campaign = tmp_path / "runs" / "t"
    name = run_name_pattern("ddp-synthetic-simple_cnn-g2-n1-b8-r0")
    deadline = time.monotonic() + 180

    def rank1_log() -> Path | None:  # the run directory appears once the job starts
        runs = [p for p in campaign.iterdir() if name.fullmatch(p.name)] if campaign.is_dir() else []
        return runs[0] / "rank1.jsonl" if len(runs) == 1 else None

    while not ((rank1 := rank1_log()) and rank1.exists() and rank1.read_text().count("\n") >= 2):
        # header + a step: the rank is training
        assert time.monotonic() < deadline, f"rank 1 never started: {(tmp_path / f'slurm-{job}.out').read_text()}"
        time.sleep(0.5)
    run_dir = find_run(campaign, "ddp-synthetic-simple_cnn-g2-n1-b8-r0")
    pid = json.loads(rank1.read_text().splitlines()[0])["pid"]
    os.kill(pid, signal.SIGKILL)  # rank 1 dies mid-training, as on a crashed node
    info = wait_for(job)
    assert info["JobState"] == "FAILED" and info["ExitCode"] != "0:0", info
    summary = run_dir / "summary.json"
    assert not summary.exists() or json.loads(summary.read_text())["status"] == "failed"


def test_overrides_reach_the_program_literally(slurm_up, tmp_path):
    # a space stays inside one override, and the run records it as given
    job = sbatch(
        "framework=ddp",
        *SMALL,
        "data.path=/tmp/my data; not a command",
        f"run.root={tmp_path}/runs",
        "run.campaign=t",
        cwd=tmp_path,
    )
    info = wait_for(job)
    log = (tmp_path / f"slurm-{job}.out").read_text()
    # ';' is refused before anything starts, in one line naming the override
    assert info["JobState"] == "FAILED", log
    assert "ddlbench: error: override 'data.path=/tmp/my data; not a command'" in log and "not allowed" in log


@pytest.mark.parametrize(
    "attack",
    [
        "run.campaign=$(touch {p})",
        "run.campaign=`touch {p}`",
        "run.campaign=x;touch {p}",
        "run.campaign=x' ; touch {p} ; '",
    ],
)
def test_shell_code_in_an_override_never_runs(slurm_up, tmp_path, attack):
    marker = tmp_path / "pwned"
    job = sbatch(*SMALL, attack.format(p=marker), f"run.root={tmp_path}/runs", cwd=tmp_path)
    info = wait_for(job)
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] == "FAILED" and info["ExitCode"] == "2:0", log
    assert log.count("ddlbench: error:") == 1 and "not allowed" in log
    assert not marker.exists()
    assert not (tmp_path / "runs").exists()


def test_each_rank_of_the_step_runs_inside_podman_and_meta_json_names_the_image(slurm_up, podman_image, tmp_path):
    """system.container on the real local cluster: srun starts 2 tasks, each `podman run ... python -m benchmarks`
    (launchers/slurm.py step_command); the run directory is written through the bind mount, meta.json holds the
    image the batch step recorded, and the job's containers are gone by their label: a container of the job's
    label left running (as a killed podman client leaves one) is removed by the job's clean-up step, which runs
    on every node of the job."""
    from launchers.container import LABEL
    from tests.multiproc.test_podman import containers, in_podman

    job = sbatch(
        "framework=ddp",
        *SMALL,
        *in_podman(podman_image),
        f"run.root={tmp_path}/runs",
        "run.campaign=t",
        cwd=tmp_path,
        flags=("--hold",),  # released once the left-over container below runs: its label needs the job id
    )
    try:
        subprocess.run(
            [
                "podman",
                "run",
                "-d",
                "--rm",
                f"--label={LABEL}=slurm-{job}",
                podman_image,
                "/bin/busybox",
                "sleep",
                "600",
            ],
            check=True,
            capture_output=True,
        )
        assert containers(f"slurm-{job}")
    except BaseException:
        subprocess.run(["scancel", job], check=False)  # no held job left in the queue of the next tests
        raise
    subprocess.run(["scontrol", "release", job], check=True)
    info = wait_for(job)
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", log
    assert "--kill-on-bad-exit=1 podman run --rm --network=host --ipc=host --pid=host" in log
    assert f"--label={LABEL}=slurm-{job}" in log
    run_dir = find_run(tmp_path / "runs" / "t", "ddp-synthetic-simple_cnn-g2-n1-b8-r0")
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    record = json.loads((run_dir / "meta.json").read_text())["container"]
    image_id = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", podman_image], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert record["runtime"] == "podman" and record["image"] == podman_image and record["digest"] == image_id
    assert not containers(f"slurm-{job}")
