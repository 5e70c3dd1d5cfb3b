"""A real run inside a container: `ddlbench run` starts torchrun and its 2 ranks inside podman (a local busybox
image, the host's Python, torch, the project and the user's DDLBENCH_CONFIG folder bound read-only, the run root
read-write); the run directory appears on the host, `results` counts it, and meta.json names the image, its id and podman's version. A
`ddlbench run` killed outright (SIGKILL of its process group) leaves no container behind: the reaper removes it
by its label, and the same command moves the dead run into attic/ and runs the cell again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.rundir import run_files
from launchers.container import LABEL, PROJECT
from launchers.lifecycle import liveness, rundir_state
from tests.longrun import LONG
from tests.multiproc.test_faults_liveness import start, stop, training, wait_for

PY = sys.executable


def host_binds() -> str:
    """The host's system and this Python (its install and its venv), read-only, as a Hydra list."""
    paths = ["/usr", "/lib", "/lib64", "/etc", sys.base_prefix, sys.prefix]
    return "[" + ",".join(f"{p}:{p}:ro" for p in dict.fromkeys(paths) if Path(p).exists()) + "]"


def in_podman(image: str) -> list[str]:
    """The overrides that run the ranks inside podman's `image` on the host's Python."""
    return [
        "system.container.runtime=podman",
        f"system.container.image={image}",
        f"system.container.python={PY}",
        f"system.container.binds={host_binds()}",
    ]


def containers(label: str) -> list[str]:
    """The ids of podman's containers (running or not) labelled ddlbench.run=label."""
    listed = subprocess.run(
        ["podman", "ps", "-a", "-q", "--filter", f"label={LABEL}={label}"], capture_output=True, text=True, check=True
    )
    return listed.stdout.split()


def test_a_two_rank_run_inside_podman_writes_its_run_directory_on_the_host(podman_image, ddlbench_process, tmp_path):
    runs = tmp_path / "runs"
    overrides = [
        "system=local_cpu",
        "framework=ddp",
        "loader=synthetic",
        "model=simple_cnn",
        "system.ranks_per_node=2",
        "run.steps=2",
        "run.warmup_steps=1",
        "run.per_gpu_batch=8",
        f"run.root={runs}",
        *in_podman(podman_image),
    ]
    # the user's config folder, outside every other bind and reached through a link: each rank reads it again, so
    # it must be bound at the path DDLBENCH_CONFIG gives ("is not a directory" inside the image otherwise)
    (tmp_path / "site" / "conf").mkdir(parents=True)
    (tmp_path / "conf").symlink_to(tmp_path / "site" / "conf")
    env = {"DDLBENCH_CONFIG": str(tmp_path / "conf")}
    done = ddlbench_process("run", *overrides, cwd=PROJECT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "podman run --rm --network=host --ipc=host --pid=host" in done.stderr
    assert f"-v {tmp_path / 'site' / 'conf'}:{tmp_path / 'conf'}:ro" in done.stderr
    (run_dir,) = (runs / "default").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["num_processes"] == 2
    meta = json.loads((run_dir / "meta.json").read_text())
    image_id = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", podman_image], capture_output=True, text=True, check=True
    ).stdout.strip()
    version = subprocess.run(["podman", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert meta["container"]["runtime"] == "podman" and meta["container"]["image"] == podman_image
    assert meta["container"]["digest"] == image_id and meta["container"]["runtime_version"] == version
    labels = subprocess.run(
        ["podman", "ps", "-a", "--filter", "label=ddlbench.run", "--format", '{{index .Labels "ddlbench.run"}}'],
        capture_output=True,
        text=True,
    )
    assert run_dir.name not in labels.stdout, "the run's container outlived it"
    results = ddlbench_process("results", str(runs / "default"), cwd=PROJECT)
    assert results.returncode == 0, results.stderr
    # the cell's settings: in its row, or once above the table where the table is too wide for them (a marks
    # column, on a busy machine: shared host)
    rows = [line.split() for line in results.stdout.splitlines() if line.lstrip().startswith("ddp ")]
    folded = "every row: framework ddp, loader synthetic, model simple_cnn, precision fp32, batch/rank 8, ranks (CPU) 2"
    assert folded in results.stdout or [r[:6] for r in rows] == [
        ["ddp", "synthetic", "simple_cnn", "fp32", "8", "2"]
    ], results.stdout


def test_a_killed_run_leaves_no_container_and_the_same_command_retries_the_cell(podman_image, rank_processes, tmp_path):
    """SIGKILL of `ddlbench run`'s process group, as a dead login shell or the OOM killer leaves it: its podman
    client dies with it, but the container (conmon's child) would train on; the reaper removes it by its label."""
    overrides = ["system=local_cpu", "framework=ddp", "loader=synthetic", "system.ranks_per_node=2", *LONG]
    overrides += in_podman(podman_image)
    first = start(tmp_path, *overrides)
    run_dir = wait_for(lambda: training(tmp_path / "default"), what="training step")
    label = f"{run_dir.name}-{first.pid}"  # launchers/launch.py run_container's token
    assert containers(label), "the run's container is not labelled"
    os.killpg(first.pid, signal.SIGKILL)  # no clean-up of its own
    first.communicate(timeout=30)
    wait_for(lambda: not containers(label), what="removal of the run's container", timeout_s=20)
    life = rundir_state.life(run_dir)
    assert not (run_dir / run_files.SUMMARY).exists() and rundir_state.state(run_dir) == "dead", life

    retry = start(tmp_path, *overrides)
    wait_for(
        lambda: training(tmp_path / "default") and (liveness.read_owner(run_dir) or {}).get("pid") == retry.pid,
        what="the retry's training step",
    )
    err = stop(retry)
    assert f"{run_dir.name} was dead (its launching process (pid {first.pid}" in err, err[-3000:]
    (kept,) = (tmp_path / "default" / rundir_state.ATTIC).iterdir()
    assert (
        kept.name.startswith(run_dir.name)
        and "dead: its launching process" in (kept / rundir_state.ATTIC_REASON).read_text()
    )
    assert json.loads((run_dir / run_files.SUMMARY).read_text())["status"] == "interrupted"
    assert not containers(f"{run_dir.name}-{retry.pid}"), "the retry's container outlived its interruption"
