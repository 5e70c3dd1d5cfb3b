"""`ddlbench doctor`: what this machine can run, and the command that fixes what it cannot."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace

from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.loaders.configs import CONFIGS as LOADERS
from benchmarks.models.configs import LIBRARIES as MODEL_LIBRARIES
from launchers.programs import LAUNCHERS
from launchers.programs.base import Launcher


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    warn: bool = False  # usable, but worth a look (printed WARN; not counted as missing)
    gpu_ok: bool = True  # what a GPU run needs beyond ok (Installation.gpu_ok)
    gpu_fix: str = ""


def torch() -> Check:
    import torch as torch_module

    gpus = torch_module.cuda.device_count()
    return Check("torch", True, f"{torch_module.__version__}, CUDA {torch_module.version.cuda}, {gpus} GPU(s) visible")


def _adapter(group: str, option: str) -> Callable[[], Check]:
    """An adapter's own probe (its installation()): every framework and loader says what it needs."""

    def check() -> Check:
        from benchmarks.adapters import adapter_class

        found = adapter_class(group, option).installation()
        return Check(f"{group}={option}", found.ok, found.detail, found.fix, gpu_ok=found.gpu_ok, gpu_fix=found.gpu_fix)

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
    """A launcher's probe (launchers/programs/): its program on PATH, or its Python package importable."""
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


def needed_by(cfg, *, in_jobs: bool = False) -> set[str]:
    """The checks a composed config's run needs: torch, Hydra, its framework and loader, its model's own
    library (transformers for model=bert), its local launcher, and with in_jobs (its cells go to Slurm) the
    launcher that starts a job's ranks (system.launcher: srun, mpirun)."""
    names = {"torch", "hydra-core", f"framework={cfg.framework.name}", f"loader={cfg.loader.name}"}
    if str(cfg.model.arch) in MODEL_LIBRARIES:
        names.add(MODEL_LIBRARIES[str(cfg.model.arch)][0])
    names.add(f"launcher={cfg.framework.local_launcher}")
    if in_jobs:
        names.add(f"launcher={cfg.system.launcher}")
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


def for_gpus(check: Check) -> Check:
    """The check as a GPU run reads it: an adapter that lacks what GPUs need (gpu_ok) is missing."""
    if check.gpu_ok or not check.ok:
        return check
    return replace(check, ok=False, fix=check.gpu_fix)


# The oldest driver that runs any toolkit of a CUDA major release (NVIDIA's CUDA Compatibility guide, "minor
# version compatibility": 11.x needs >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580.65.06). torch's wheels carry
# their CUDA runtime, so the node's driver is what decides.
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# the CUDA builds PyTorch publishes wheels of recent releases for (its own package index: make venv
# TORCH_CUDA=<tag>; torch 2.9 to 2.11 have these three; older tags such as cu118, cu121, cu124 ended with 2.5-2.7)
TORCH_CUDA_TAGS = ("cu126", "cu128", "cu130")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def driver_of_this_host() -> tuple[str, str] | None:
    """(driver version, the CUDA version it supports) as nvidia-smi says them; None without a driver here."""
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Driver Version", "CUDA Version") and value.strip():
            found.setdefault(key.strip(), value.strip())
    if "Driver Version" not in found:
        return None
    return found["Driver Version"], found.get("CUDA Version", "")


def cuda_fit(torch_version: str, torch_cuda: str | None, driver: tuple[str, str] | None, *, where: str) -> Check:
    """Whether this torch's CUDA runs on the node's driver; the fix names the TORCH_CUDA build that would.
    `driver`: (driver version, its CUDA version), None where this host has none; `where`: how to run the
    doctor on a compute node instead."""
    if not torch_cuda:
        return Check(
            "cuda driver", False, f"torch {torch_version} is a CPU build", "make venv TORCH_CUDA=cu130 (or cu126, ...)"
        )
    major = _version(torch_cuda)[0]
    needs = f"torch {torch_version} needs a driver for CUDA {major}.x (>= {MIN_DRIVER.get(major, '?')})"
    if driver is None:
        return Check(
            "cuda driver", True, f"{needs}; no NVIDIA driver on this host: check a node with {where}", warn=True
        )
    version, driver_cuda = driver
    supported = _version(driver_cuda) if driver_cuda else ()
    ok = _version(version) >= _version(MIN_DRIVER.get(major, "0")) and (not supported or supported[0] >= major)
    detail = f"{needs}; this node: driver {version} (CUDA {driver_cuda or '?'})"
    if ok:
        return Check("cuda driver", True, detail)
    fitting = [t for t in TORCH_CUDA_TAGS if runs_on(t, version, supported)]
    build = (
        f"make venv TORCH_CUDA={fitting[-1]}"
        if fitting
        else f"no PyTorch CUDA build of this torch runs on driver {version}: ask the site for a newer driver"
    )
    container_cuda = f"{supported[0]}.x" if supported else "this driver's CUDA"
    return Check(
        "cuda driver",
        False,
        detail,
        f"{build}, or a container built on CUDA {container_cuda} (docs/containers.md)",
    )


def runs_on(tag: str, driver_version: str, driver_cuda: tuple[int, ...]) -> bool:
    """Whether PyTorch's build `tag` (cu128: CUDA 12.8) runs on this driver: CUDA's minor-version compatibility
    runs any 12.x build on a driver of CUDA 12.y at or above MIN_DRIVER[12], whatever y."""
    major = int(tag[2:-1])
    if driver_cuda and driver_cuda[0] < major:
        return False
    return major in MIN_DRIVER and _version(driver_version) >= _version(MIN_DRIVER[major])


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
        mark = "MISS" if not c.ok else "WARN" if c.warn else "ok  "
        lines.append(f"{mark} {c.name:<22} {c.detail}" + (f"   -> fix: {c.fix}" if c.fix else ""))
    return "\n".join(lines)
