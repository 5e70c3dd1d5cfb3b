"""`ddlbench doctor`: what this machine can run, and the command that fixes what it cannot."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.launch import LAUNCHERS
from benchmarks.launch.base import Launcher
from benchmarks.loaders.configs import CONFIGS as LOADERS
from benchmarks.models.configs import LIBRARIES as MODEL_LIBRARIES


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def torch() -> Check:
    import torch as torch_module

    gpus = torch_module.cuda.device_count()
    return Check("torch", True, f"{torch_module.__version__}, CUDA {torch_module.version.cuda}, {gpus} GPU(s) visible")


def _adapter(group: str, option: str) -> Callable[[], Check]:
    """An adapter's own probe (its installation()): every framework and loader says what it needs."""

    def check() -> Check:
        from benchmarks.components import adapter_class

        found = adapter_class(group, option).installation()
        return Check(f"{group}={option}", found.ok, found.detail, found.fix)

    check.__name__ = f"{group}={option}"
    return check


def _module(name: str, label: str, fix: str) -> Callable[[], Check]:
    def check() -> Check:  # named by `label` (below), as its line is
        if importlib.util.find_spec(name) is None:
            return Check(label, False, "not installed", fix)
        from importlib import metadata

        try:
            version = metadata.version(label)
        except metadata.PackageNotFoundError:
            version = "installed"
        return Check(label, True, version)

    check.__name__ = label
    return check


def _launcher(launcher: Launcher) -> Callable[[], Check]:
    """A launcher's probe (benchmarks/launch/): its program on PATH, or its Python package importable."""
    label, probe = f"launcher={launcher.name}", launcher.probe

    def check() -> Check:
        if probe.kind == "program":
            path = shutil.which(probe.name)
            return Check(label, path is not None, path or f"{probe.name} not on PATH", "" if path else probe.fix)
        found = importlib.util.find_spec(probe.name) is not None
        return Check(
            label,
            found,
            probe.name if found else f"python package {probe.name} not installed",
            "" if found else probe.fix,
        )

    check.__name__ = label
    return check


CHECKS: list[Callable[[], Check]] = [
    torch,
    _module("hydra", "hydra-core", "pip install -e . (make test installs everything)"),
    *(_adapter("framework", option) for option in FRAMEWORKS),
    *(_adapter("loader", option) for option in LOADERS),
    *(_module(module, module, f"{fix} (model={arch})") for arch, (module, fix) in MODEL_LIBRARIES.items()),
    _module("mpi4py", "mpi4py", "pip install -e '.[mpi]' (make mpi): commbench --backends mpi"),
    *(_launcher(launcher) for launcher in LAUNCHERS.values()),
]


def needed_by(cfg) -> set[str]:
    """The checks a composed config's run needs: torch, Hydra, its framework and loader, its model's own
    library (transformers for model=bert), and its local launcher."""
    names = {"torch", "hydra-core", f"framework={cfg.framework.name}", f"loader={cfg.loader.name}"}
    if str(cfg.model.arch) in MODEL_LIBRARIES:
        names.add(MODEL_LIBRARIES[str(cfg.model.arch)][0])
    names.add(f"launcher={cfg.framework.local_launcher}")
    return names


def gpu_check(cfg) -> Check:
    """Whether this machine has the GPUs a CUDA run's ranks_per_node asks for."""
    import torch as torch_module

    wanted, found = int(cfg.system.ranks_per_node), torch_module.cuda.device_count()
    ok = found >= wanted
    if found == 0:
        fix = "no GPU here: use system=local_cpu, or run on a GPU machine"
    else:
        fix = f"run where {wanted} GPU(s) are visible, or pass system.ranks_per_node={found}"
    detail = f"{found} visible, system={cfg.system.name} runs {wanted} rank(s) per node"
    return Check("gpus", ok, detail, "" if ok else fix)


def run_checks(only: set[str] | None = None) -> list[Check]:
    """Every check, or those named in `only` (Check.name)."""
    results = []
    for check in CHECKS:
        if only is not None and getattr(check, "__name__", "") not in only:
            continue
        try:
            results.append(check())
        except Exception as error:  # a broken install is a finding, not a crash of the doctor
            results.append(Check(getattr(check, "__name__", "check"), False, f"{type(error).__name__}: {error}"))
    return results


def format_checks(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else "MISS"
        lines.append(f"{mark} {c.name:<22} {c.detail}" + (f"   -> fix: {c.fix}" if c.fix else ""))
    return "\n".join(lines)
