"""The launchers: one module per launcher, each ending in `LAUNCHER = <instance>` of base.Launcher.

A launcher is everything about one way of starting ranks: its argv on one machine, across hosts and inside a
Slurm allocation, whether it runs on every host and reads a hostfile, how a rank reads its place in the job
from the launcher's variables (benchmarks/distenv.py asks each in turn), and what `ddlbench doctor` checks.
LAUNCHERS is found by listing this package, so adding a launcher is adding its file (docs/architecture.md);
the config keys that name one (framework.local_launcher, system.launcher) take their closed sets from here.
"""

from __future__ import annotations

import importlib
import pkgutil

from benchmarks.adapter_config import Choice
from benchmarks.errors import ConfigError
from launchers.programs.base import LOCAL, SLURM, Launcher

_NOT_LAUNCHERS = {"base"}


def _found() -> dict[str, Launcher]:
    launchers = []
    for module_info in pkgutil.iter_modules(__path__):
        if module_info.name not in _NOT_LAUNCHERS:
            launchers.append(importlib.import_module(f"{__name__}.{module_info.name}").LAUNCHER)
    return {launcher.name: launcher for launcher in sorted(launchers, key=lambda launcher: launcher.order)}


LAUNCHERS: dict[str, Launcher] = _found()


def names(key: str) -> list[str]:
    """The launchers the config key (LOCAL or SLURM) may name, in their order."""
    return [name for name, launcher in LAUNCHERS.items() if key in launcher.scopes]


def get(name: str, key: str, *, label: str | None = None) -> Launcher:
    """The launcher named by the config key; ConfigError naming the key (or label) and the choices otherwise."""
    allowed = names(key)
    if name not in allowed:
        listed = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        raise ConfigError(f"{label or key}={name!r} is unknown; choose {listed}")
    return LAUNCHERS[name]


# the closed sets of the config keys (Choices of the structured configs)
LocalLauncher = Choice("LocalLauncher", [(name, name) for name in names(LOCAL)])
SlurmLauncher = Choice("SlurmLauncher", [(name, name) for name in names(SLURM)])
