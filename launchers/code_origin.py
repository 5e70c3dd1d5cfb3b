"""Which code the ranks run: the checkout (or the installed package) the launching `ddlbench` imported.

`python -m benchmarks` puts its working directory first on sys.path, so a rank started from a second checkout
would import that checkout's engine while the launcher, run.sh and the doctor came from the first (the venv's
editable install). Every launch path gives its ranks `launch_environment()`: the launching checkout first on
PYTHONPATH and PYTHONSAFEPATH=1 (Python 3.11+: no working directory on sys.path), so that every rank imports the
code of the `ddlbench` that launched it. A Python older than 3.11 ignores PYTHONSAFEPATH: there the working
directory still wins, and each rank's log header records the code it ran (benchmarks/runlog.py code_provenance).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import benchmarks
from benchmarks.runlog import git_provenance
from launchers.lifecycle.doctor import Check

# the folder holding the `benchmarks` package this process imported: a checkout, or site-packages
PROJECT = Path(benchmarks.__file__).resolve().parents[1]
SAFE_PATH = "PYTHONSAFEPATH"


def checkout(project: Path = PROJECT) -> Path | None:
    """The checkout the launching code is (None where it is installed from a wheel: site-packages must not lie
    over another environment's packages)."""
    return project if (project / "benchmarks").is_dir() and (project / "pyproject.toml").is_file() else None


def launch_environment(environ: Mapping[str, str] | None = None, *, project: Path | None = None) -> dict[str, str]:
    """What the ranks' environment gains so that they import the launching code: PYTHONPATH with the checkout
    first and PYTHONSAFEPATH=1; {} for an installed package (the ranks' python finds the same one)."""
    environ = os.environ if environ is None else environ
    where = checkout() if project is None else checkout(project)
    if where is None:
        return {}
    paths = [str(where), *(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), SAFE_PATH: "1"}


def foreign_checkout(cwd: Path, *, project: Path = PROJECT) -> Path | None:
    """The checkout the working directory belongs to where it is another one than the launching code's (the
    doctor's line: `ddlbench` from one checkout run in a second); None when they are one, or cwd is in none."""
    for folder in (cwd.resolve(), *cwd.resolve().parents):
        if checkout(folder) is not None:
            return None if folder == project.resolve() else folder
    return None


# what a console script's interpreter imports (its sys.path has no working directory): the folder above benchmarks
_WHERE = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; import benchmarks, pathlib; "
_WHERE += "print(pathlib.Path(benchmarks.__file__).resolve().parents[1])"


def path_ddlbench(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder the `ddlbench` on PATH imports its code from (its script's interpreter, as it would start
    here); None where there is none or it cannot tell."""
    script = shutil.which("ddlbench")
    if script is None:
        return None
    try:
        first = Path(script).read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("#!"):
        return None
    python = first[2:].strip().split()[0]
    try:
        out = subprocess.run(
            [python, "-c", _WHERE], capture_output=True, text=True, timeout=30, check=True, env=environ
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out) if out else None


def code_check(cwd: Path, *, project: Path = PROJECT, on_path: Path | None = None) -> Check:
    """The doctor's `code` line: the folder the launching `ddlbench` imports (its ranks too: launch_environment)
    with its git sha, a warning where the working directory is another checkout (a venv's editable install of one
    checkout, run from a second), or where the `ddlbench` on PATH (on_path: path_ddlbench) imports another."""
    code = git_provenance(project)
    dirty = " (dirty)" if code["git_dirty"] else ""
    detail = f"{project}" + (f" at {code['git_sha'][:12]}{dirty}" if code["git_sha"] else "")
    other = foreign_checkout(cwd, project=project)
    if other is not None:
        fix = f"PYTHONPATH={other} python -m ddlbench ..., or pip install -e {other} into this venv"
        return Check("code", True, f"{detail} runs, not the checkout {other} this is run from", fix, warn=True)
    if on_path is not None and on_path.resolve() != project.resolve():
        fix = f"python -m ddlbench with this Python, or pip install -e {project} into the venv on PATH"
        return Check("code", True, f"{detail}; the ddlbench on PATH runs {on_path}", fix, warn=True)
    return Check("code", True, detail)
