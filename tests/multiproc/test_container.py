"""A real run inside a container: `ddlbench run` starts torchrun and its 2 ranks inside podman (a local busybox
image, the host's Python, torch and the project bound read-only, the run root read-write); the run directory
appears on the host, `results` counts it, and meta.json names the image, its id and podman's version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from launchers.container import PROJECT

PY = sys.executable


def host_binds() -> str:
    """The host's system and this Python (its install and its venv), read-only, as a Hydra list."""
    paths = ["/usr", "/lib", "/lib64", "/etc", sys.base_prefix, sys.prefix]
    return "[" + ",".join(f"{p}:{p}:ro" for p in dict.fromkeys(paths) if Path(p).exists()) + "]"


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
        "system.container.runtime=podman",
        f"system.container.image={podman_image}",
        f"system.container.python={PY}",
        f"system.container.binds={host_binds()}",
    ]
    done = ddlbench_process("run", *overrides, cwd=PROJECT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "podman run --rm --init" in done.stderr
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
    (row,) = [line.split() for line in results.stdout.splitlines() if line.lstrip().startswith("ddp ")]
    assert row[:6] == ["ddp", "synthetic", "simple_cnn", "fp32", "8", "2"], results.stdout
