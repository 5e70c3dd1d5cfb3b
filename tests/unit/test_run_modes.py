"""`ddlbench run` as Hydra users expect it: -m sweeps (one launched run per combination), --cfg job, and
tab completion (the bash script and its candidates)."""

from __future__ import annotations

import os
import subprocess
import sys

from ddlbench.completion import BASH, candidates
from ddlbench.run import split_sweep, sweep
from tests.conftest import REPO


def test_sweep_values_split_outside_brackets():
    assert (
        split_sweep("8,16") == ["8", "16"]
        and split_sweep("[1,2],[4]") == ["[1,2]", "[4]"]
        and split_sweep("x") == ["x"]
    )
    assert sweep(["a=1,2", "b=x,y", "c=[1,2]"]) == [
        ["a=1", "b=x", "c=[1,2]"],
        ["a=1", "b=y", "c=[1,2]"],
        ["a=2", "b=x", "c=[1,2]"],
        ["a=2", "b=y", "c=[1,2]"],
    ]


def test_multirun_runs_every_combination_in_its_own_directory(tmp_path, ddlbench):
    result = ddlbench(
        "run",
        "-m",
        "model=simple_cnn",
        "run.per_gpu_batch=2,4",
        "system.ranks_per_node=1",
        "run.steps=2",
        "run.warmup_steps=1",
        f"run.root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "multirun 2/2: run.per_gpu_batch=4" in result.stderr and "2 of 2 run(s) completed" in result.stderr
    names = sorted(p.name for p in (tmp_path / "default").iterdir())
    assert len(names) == 2 and "-b2-" in names[0] and "-b4-" in names[1]


def test_multirun_validates_every_combination_before_the_first_starts(tmp_path, cli):
    result = cli("run", "-m", "model=simple_cnn", "model.depth=18", "system.ranks_per_node=1,0", f"run.root={tmp_path}")
    assert result.returncode == 2 and "system.ranks_per_node=0 must be >= 1" in result.stderr
    assert not (tmp_path / "default").exists()


def test_several_values_without_m_is_one_line(cli):
    result = cli("run", "run.per_gpu_batch=2,4")
    assert result.returncode == 2 and "pass -m to run each combination" in result.stderr


def test_cfg_job_prints_the_composed_config(cli):
    result = cli("run", "--cfg", "job", "--resolve", "loader=native", "system=h200")
    assert result.returncode == 0 and "num_workers: 15" in result.stdout and "name: native" in result.stdout


def test_completion_candidates():
    commands = ["campaign", "report", "run"]
    assert candidates(["ru"], commands) == ["run"]
    assert candidates(["run", "framework=hor"], commands) == ["framework=horovod"]
    assert candidates(["run", "loader=native", "loader.num"], commands) == ["loader.num_workers="]
    assert "framework=" in candidates(["run", "fram"], commands)
    assert not any(c.endswith("_target_=") for c in candidates(["run", "framework."], commands))
    assert candidates(["report", "x"], commands) == []


def test_the_bash_script_completes_after_an_equals_sign(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ddlbench").write_text(f'#!/bin/sh\nexec {sys.executable} -m ddlbench.cli "$@"\n')
    (bin_dir / "ddlbench").chmod(0o755)
    line = "ddlbench run framework=hor"
    script = (
        f'{BASH}\nCOMP_LINE="{line}"; COMP_POINT={len(line)}; _ddlbench_complete; printf "%s\\n" "${{COMPREPLY[@]}}"'
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["horovod"], out  # what follows the '=' (bash splits words there)


def test_progress_gives_an_eta():
    from benchmarks.loop import eta_text

    assert [eta_text(s) for s in (4.4, 65, 3 * 3600 + 125)] == ["4s", "1m05s", "3h02m"]


def test_doctor_checks_what_the_given_run_needs_and_exits_1_when_it_lacks_it(monkeypatch, capsys):
    import shutil

    from ddlbench.cli import main

    assert main(["doctor", "framework=ddp", "loader=synthetic"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[1] for line in lines] == [
        "code",  # which checkout's code the runs will import
        "torch",
        "hydra-core",
        "framework=ddp",
        "loader=synthetic",
        "launcher=torchrun",
    ]
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "mpirun" else real_which(name))
    assert main(["doctor", "framework=horovod", "framework.local_launcher=mpirun"]) == 1
    out = capsys.readouterr()
    assert (
        "MISS launcher=mpirun" in out.out
        and "apt-get install openmpi-bin" in out.out
        and "1 missing: launcher=mpirun" in out.err
    )


def test_dry_runs_print_the_command_on_stdout(tmp_path, cli):
    result = cli("run", "--dry-run", "model=simple_cnn", f"run.root={tmp_path}")
    assert result.returncode == 0 and result.stdout.startswith(sys.executable)
    from launchers.local import gpu_driver

    if gpu_driver():  # a GPU machine: fresh ranks (launchers/local.py ranks_may_fork)
        assert " -m benchmarks " in result.stdout
    else:  # a CPU run's ranks fork from torchrun's agent, which runs the rank program's file
        assert "--start-method=fork " in result.stdout and "/benchmarks/__main__.py " in result.stdout
    assert "[ddlbench]" not in result.stdout


def test_doctor_counts_the_gpus_a_cuda_run_needs(capsys):
    from ddlbench.cli import main

    assert main(["doctor", "system=h200"]) == 1  # this machine has no GPU
    out = capsys.readouterr().out
    assert "MISS gpus" in out and "system=h200 runs 1 rank(s) per node" in out and "system=local_cpu" in out
