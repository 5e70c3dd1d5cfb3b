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
from collections.abc import Mapping
from pathlib import Path

import benchmarks

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
