"""Where the files the tool reads at run time are, in a checkout and in an installed wheel alike. Torch-free.

The Hydra configs live in the repository's top-level conf/ and the batch script in slurm/run.sh. The
links benchmarks/_shipped/conf and benchmarks/_shipped/slurm point there, and the wheel carries copies
of both inside the package (pyproject.toml's package data). So importlib.resources finds them wherever
`benchmarks` is: the checkout (editable install) or site-packages.

A user's own site profiles and experiments stay outside the install: the folder DDLBENCH_CONFIG names
(system/<name>.yaml, experiment/<name>.yaml, ... as in conf/) joins Hydra's search path. Its options
are added to the shipped ones; one with a shipped option's name takes that name's place.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from benchmarks.errors import ConfigError

USER_CONFIG_ENV = "DDLBENCH_CONFIG"


def _shipped(name: str) -> Path:
    return Path(str(resources.files("benchmarks") / "_shipped" / name))


def conf_dir() -> Path:
    """The shipped Hydra config root (config.yaml and one folder per group)."""
    return _shipped("conf")


def slurm_script() -> Path:
    """slurm/run.sh: one ddlbench run as a batch job (sbatch's script)."""
    return _shipped("slurm") / "run.sh"


def user_conf_dir(environ=os.environ) -> Path | None:
    """The folder of the user's own config options (DDLBENCH_CONFIG), or None; a one-line error when it
    is set but is no folder."""
    value = environ.get(USER_CONFIG_ENV)
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(
            f"{USER_CONFIG_ENV}={value} is not a directory; point it at a folder of your own options "
            "(system/<name>.yaml, experiment/<name>.yaml, ...) or unset it"
        )
    return path


def search_path_override(environ=os.environ) -> list[str]:
    """The Hydra override that adds the user's config folder to the search path ([] without one)."""
    path = user_conf_dir(environ)
    return [] if path is None else [f"hydra.searchpath=[file://{path}]"]
