"""The built wheel, installed into a fresh virtual environment, run from a folder outside the checkout:
configs, the batch script and the reference tables come from the installed package
(benchmarks/resources.py), a user's own site profile from DDLBENCH_CONFIG, and a smoke campaign runs on
the local Slurm cluster from it."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the wheel's build and a fresh venv: about 85 s on the CI machine
# under pytest-xdist, one worker: the module's tests share one venv, and its smoke campaign the Slurm queue
XDIST_GROUP = "slurm"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh venv holding the wheel; its dependencies (torch, hydra, ...) come from this environment's
    site-packages through a .pth line, which does not run this environment's editable-install hook."""
    root = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("ddlbench-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    purelib = subprocess.run(
        [str(root / "venv/bin/python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # away from the checkout (its ddlbench.egg-info would read as installed) and with no PYTHONPATH
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    installed = subprocess.run(
        [str(root / "venv/bin/python"), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
        capture_output=True,
        text=True,
        cwd=root,
        env=clean,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    # after the install: with this environment's editable ddlbench in sight, pip would call it installed
    Path(purelib, "ddlbench-test-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return root / "venv"


def run(venv: Path, cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DDLBENCH_CONFIG")}
    return subprocess.run(
        [str(venv / "bin/ddlbench"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**environ, **(env or {})},
        timeout=600,
    )


def test_the_installed_package_is_the_one_that_runs(venv, tmp_path):
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import benchmarks.resources as r; print(r.conf_dir())"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip().startswith(str(venv)) and (Path(where.stdout.strip()) / "config.yaml").is_file()


def test_runs_results_and_report_from_the_wheel(venv, tmp_path):
    assert (
        run(venv, tmp_path, "data", "synth", "--out", "d", "--classes", "2", "--per-class", "8", "--quiet").returncode
        == 0
    )
    common = ["model=simple_cnn", "data.path=d", "run.per_gpu_batch=4", "run.steps=2", "run.warmup_steps=1"]
    for loader in ("native", "synthetic"):
        result = run(venv, tmp_path, "run", f"loader={loader}", *common)
        assert result.returncode == 0, result.stderr[-3000:]
    results = run(venv, tmp_path, "results", "runs/default")
    assert results.returncode == 0 and "native" in results.stdout and "synthetic" in results.stdout, results.stderr
    report = run(venv, tmp_path, "report", "runs", "--out", "report", "--formats", "png", "--reference", "aach2023")
    assert report.returncode == 0, report.stderr[-3000:]
    assert "Compared with aach2023" in (tmp_path / "report" / "report.md").read_text()


def test_a_site_profile_outside_the_install(venv, tmp_path):
    mine = tmp_path / "my_conf" / "system"
    mine.mkdir(parents=True)
    (mine / "mysite.yaml").write_text("defaults:\n  - local_cpu\n  - _self_\nname: mysite\nranks_per_node: 1\n")
    env = {"DDLBENCH_CONFIG": str(tmp_path / "my_conf")}
    result = run(
        venv,
        tmp_path,
        "run",
        "system=mysite",
        "model=simple_cnn",
        "run.steps=2",
        "run.warmup_steps=1",
        "run.per_gpu_batch=2",
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs" / "default").iterdir()
    assert "name: mysite" in (run_dir / "config.yaml").read_text()
    missing = run(venv, tmp_path, "run", "system=mysite")
    assert missing.returncode == 2 and "system=mysite is not an option" in missing.stderr


def test_a_smoke_campaign_on_slurm_from_the_wheel(venv, tmp_path, slurm_up):
    grid = ["experiment=slurm_smoke", "system=slurm_cpu"]
    dry = run(venv, tmp_path, "campaign", "submit", *grid, "--dry-run")
    assert dry.returncode == 0 and str(venv) in dry.stdout + dry.stderr  # the installed batch script
    submitted = run(venv, tmp_path, "campaign", "submit", *grid)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = run(venv, tmp_path, "campaign", "status", *grid)
        if status.stdout.strip().endswith("2 cells: 2 completed"):
            break
        time.sleep(3)
    assert status.stdout.strip().endswith("2 cells: 2 completed"), status.stdout
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "runs" / "slurm_smoke").glob("*/summary.json")]
    assert sorted(s["world_size"] for s in summaries) == [1, 2]
