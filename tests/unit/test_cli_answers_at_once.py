"""A mistake made while typing comes back at once (issue 36): the config is checked before torch or an
adapter is imported, --help and --version import argparse-level code only, and a file where a folder is
meant is one line, exit 2. How long they take is perf/cli_speed.py's business, not a test's."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

from tests.conftest import REPO

HEAVY = ("torch", "pandas", "matplotlib")
# (argv, the heavy libraries it may import)
CASES = [
    (["--help"], ()),
    (["--version"], ()),
    (["predict", "--help"], ()),
    (["run", "framework=mxnet"], ("pandas", "matplotlib")),
    (["run", "run.stepz=3"], ("pandas", "matplotlib")),
    (["run", "run.steps=abc"], ("pandas", "matplotlib")),
    (["run", "model.depth=7"], ("pandas", "matplotlib")),
    (["run", "--cfg", "job", "framework=horovod"], ("pandas", "matplotlib")),
]


def test_help_version_and_a_refused_run_import_no_torch():
    """One fresh Python runs the cases in order, each through main(argv), and says after each which heavy
    libraries are loaded (import order is the point, so this one test needs a process of its own)."""
    code = (
        "import contextlib, io, json, sys\nfrom ddlbench.cli import main\n"
        f"for argv in {[argv for argv, _ in CASES]!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        try:\n            exit_code = main(argv)\n"
        "        except SystemExit as exit_:\n            exit_code = exit_.code\n"
        f"    print(json.dumps([exit_code, [m for m in {HEAVY!r} if m in sys.modules]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == len(CASES)
    for (argv, allowed), (exit_code, loaded) in zip(CASES, lines):
        expected_exit = 0 if argv[-1] in ("--help", "--version") or "--cfg" in argv else 2
        assert exit_code == expected_exit, argv
        assert set(loaded) <= set(allowed), f"ddlbench {' '.join(argv)} imported {loaded}"


def test_version(cli):
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"ddlbench {version('ddlbench')}\n"


def test_a_mistyped_key_suggests_the_closest(cli):
    result = cli("run", "run.stepz=3")
    assert result.returncode == 2
    assert result.stderr == (
        "ddlbench: error: run.stepz is not a config key; did you mean run.steps? "
        "'ddlbench run --cfg job' prints every key\n"
    )


def test_data_synth_out_an_existing_file_is_one_line(cli, tmp_path):
    afile = tmp_path / "afile.txt"
    afile.write_text("not a folder\n")
    for args in (["synth"], ["convert", "--from", str(tmp_path)]):
        result = cli("data", *args, "--out", str(afile))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"ddlbench: error: --out {afile} is a file; pass a new folder to write to")
        assert len(result.stderr.splitlines()) == 1
    assert afile.read_text() == "not a folder\n"


def test_a_data_path_that_is_a_file_names_a_folder(cli, tmp_path):
    afile = tmp_path / "afile.txt"
    afile.write_text("")
    result = cli("run", "loader=native", f"data.path={afile}")
    assert result.returncode == 2
    assert "is a file, not a folder" in result.stderr and "--out data/synth'" in result.stderr
    assert f"--out {afile}" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_slurm_batch_step_imports_no_torch(tmp_path):
    """The batch script's launcher (python -m launchers.slurm launch) refuses a bad override, and builds a
    valid job's srun line, without torch: only the ranks need it (3.5 s of CPU per job on 2 cores)."""
    allocation = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "SLURM_JOB_NUM_NODES": "1", "SLURM_JOB_NODELIST": "n1"}
    code = (
        "import contextlib, io, json, os, sys\nfrom launchers.slurm import main\n"
        f"os.environ.update({allocation!r})\n"
        f"for argv in [['launch', 'run.campaign=$(x)'], ['launch', '--dry-run', 'run.root={tmp_path}']]:\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        exit_code = main([*argv, 'system=slurm_cpu'])\n"
        "    print(json.dumps([exit_code, 'torch' in sys.modules]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert [json.loads(line) for line in result.stdout.splitlines()] == [[2, False], [0, False]]
