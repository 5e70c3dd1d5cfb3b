"""Containers (system.container): the argv that runs a launcher or a rank inside the image, per runtime, and
what a run records of the image (meta.json `container`). docs/containers.md says how to use them.

The argv builders are pure functions from the config to a list, checked against each runtime's documented
command line:
- apptainer / singularity: `apptainer exec [--nv] [--bind src:dst[:ro]]... IMAGE CMD` (apptainer.org, "apptainer
  exec" and "Bind Paths and Mounts": `--bind src[:dest[:opts]]`, `--nv` for NVIDIA GPUs; the host environment
  passes in by default, and $HOME, /tmp and the working directory are bound by default);
- pyxis: no prefix, srun flags `--container-image=IMAGE --container-mounts=SRC:DST[:FLAGS],...
  --container-workdir=PATH` (NVIDIA/pyxis wiki, "Usage"; the task's environment passes in);
- podman: `podman run --rm --network host --ipc host --pid host --label ddlbench.run=TOKEN -e NAME... -v
  src:dst[:ro]... -w DIR IMAGE CMD` (podman-run(1); `-e NAME` passes the variable's value from the
  environment, `-e NAME*` every variable of that prefix). `--pid host`: the pid a rank logs (its log's header)
  is its pid on the host, which is what tells a dead run from a live one (benchmarks/liveness.py: in a pid
  namespace of its own, rank pid 15 would be the host's pid 15, alive); the launcher is no PID 1 then, so its
  signals act as on the host (podman refuses `--init` there: none is needed); the label lets the stop path
  remove every container of the run (`stop_argv`) when the podman client was killed and its container would
  live on.

Where the wrap goes: a launcher that starts its ranks as Python children of its own agent (torchrun,
deepspeed) runs inside one container; a launcher that starts each rank as a program (srun, mpirun,
horovodrun) stays on the host and each rank runs in a container of its own (RankProgram.container).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.errors import ConfigError
from benchmarks.runlog import CONTAINER_ENV

PROJECT = Path(__file__).resolve().parents[1]  # the code the ranks run (`python -m benchmarks` from here)
LABEL = "ddlbench.run"
# what a rank reads of its launcher's environment: podman passes in only the variables it is told (apptainer and
# pyxis pass the whole environment); NAME* passes every variable of that prefix
PASSED = (
    "DDLBENCH_*",
    "MASTER_ADDR",
    "MASTER_PORT",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "OMPI_*",
    "PMIX_*",
    "SLURM_*",
    "HOROVOD_*",
    "NCCL_*",
    "GLOO_*",
    "OMP_*",
    "CUDA_*",
    "TORCH_*",
    "PYTHONPATH",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Container:
    """The image a run's ranks run in, its binds resolved: (host, container, read_only)."""

    runtime: str
    image: str
    binds: tuple[str, ...]  # host:container[:opts], the run's own first
    env: tuple[str, ...]  # variable names passed in (podman): PASSED, system.env's and system.container.env
    named: tuple[str, ...]  # system.container.env alone: pyxis passes the task's environment, these over the image's
    args: tuple[str, ...]
    python: str
    workdir: str
    gpus: bool
    token: str  # podman: the label value the stop path finds the run's containers by


def _run_binds(*, writable: Sequence[str], readable: Sequence[str]) -> list[str]:
    """host:host[:ro] of each path the run reads or writes, each once, parents first; a path inside another
    bound one of the same mode is left out (it is there already)."""
    chosen: dict[str, bool] = {}  # path -> read-only
    for path, read_only in [*((p, True) for p in readable), *((p, False) for p in writable)]:
        resolved = str(Path(path).expanduser().resolve())
        if not read_only or resolved not in chosen:
            chosen[resolved] = read_only
    kept = []
    for path in sorted(chosen, key=lambda p: (p.count("/"), p)):
        inside = [k for k in kept if path == k or path.startswith(k.rstrip("/") + "/")]
        if inside and chosen[inside[-1]] == chosen[path]:
            continue
        kept.append(path)
    return [f"{p}:{p}:ro" if chosen[p] else f"{p}:{p}" for p in kept]


def of(
    system: Mapping,
    *,
    run_root: str | Path,
    writable: Sequence[str | Path] = (),
    readable: Sequence[str | Path | None] = (),
    workdir: str | Path | None = None,
    token: str = "",
) -> Container | None:
    """The container of system.container, with the run root bound read-write and the project, the working
    directory and `readable` (data.path) read-only; None where system.container.runtime is none."""
    spec = system["container"]
    runtime = str(spec["runtime"])
    if runtime == "none":
        return None
    if not spec.get("image"):
        raise ConfigError(
            f"system.container.runtime={runtime} needs system.container.image (a .sif file for apptainer, an image "
            "reference for podman, an enroot URI or .sqsh for pyxis); set it, or system.container.runtime=none"
        )
    workdir = str(Path(workdir or os.getcwd()).resolve())
    binds = _run_binds(
        writable=[str(p) for p in (run_root, *writable)], readable=[str(p) for p in (PROJECT, *readable, workdir) if p]
    )
    return Container(
        runtime=runtime,
        image=str(spec["image"]),
        binds=(*binds, *(str(b) for b in spec.get("binds") or ())),
        env=tuple(
            dict.fromkeys([*PASSED, *(str(k) for k in system.get("env") or {}), *map(str, spec.get("env") or ())])
        ),
        named=tuple(str(n) for n in spec.get("env") or ()),
        args=tuple(str(a) for a in spec.get("args") or ()),
        python=str(spec.get("python") or "python3"),
        workdir=workdir,
        gpus=str(system.get("device")) == "cuda",
        token=token,
    )


def for_run(cfg, *, run_dir: Path, token: str) -> Container | None:
    """The container a run's ranks run in (None for none): the run root bound read-write (the run directory where
    run.dir lies outside it), the node-local scratch too where the run stages its data (data.stage=node_local:
    a node's ranks must see the one copy its first rank makes), the project, the working directory and the data
    read-only; `token` labels its containers (podman)."""
    from benchmarks.data.staging import enabled, scratch_mount

    root = Path(str(cfg.run.root)).resolve()
    staged = enabled(cfg.data)
    scratch = scratch_mount(cfg.system.get("local_scratch")) if staged else None
    runtime = str(cfg.system.container.runtime)
    if staged and scratch is None and runtime in ("podman", "pyxis"):  # apptainer binds the host's /tmp itself
        raise ConfigError(
            f"data.stage=node_local with system.container.runtime={runtime}: system.local_scratch="
            f"{cfg.system.get('local_scratch')} names no folder here to bind, and each rank's container has its own "
            "/tmp; set system.local_scratch to a folder that exists on every node (e.g. /scratch/local)"
        )
    return of(
        cfg.system,
        run_root=root if run_dir.is_relative_to(root) else run_dir,
        writable=[scratch] if scratch else [],
        readable=[cfg.data.path, cfg.data.val_path],
        token=token,
    )


def prefix(container: Container | None) -> list[str]:
    """What goes before a command to run it inside the container; [] for none and for pyxis (srun_flags)."""
    if container is None or container.runtime == "pyxis":
        return []
    if container.runtime in ("apptainer", "singularity"):
        binds = [a for b in container.binds for a in ("--bind", b)]
        return [
            container.runtime,
            "exec",
            *(["--nv"] if container.gpus else []),
            *binds,
            *container.args,
            container.image,
        ]
    assert container.runtime == "podman", container.runtime
    env = [a for name in container.env for a in ("-e", name)]
    binds = [a for b in container.binds for a in ("-v", b)]
    return [
        "podman",
        "run",
        "--rm",
        "--network=host",
        "--ipc=host",
        "--pid=host",
        f"--label={LABEL}={container.token}",
        *(["--device=nvidia.com/gpu=all"] if container.gpus else []),
        *env,
        *binds,
        f"--workdir={container.workdir}",
        *container.args,
        container.image,
    ]


def srun_flags(container: Container | None) -> list[str]:
    """pyxis's srun flags (the image, its mounts, the working directory); [] for every other runtime."""
    if container is None or container.runtime != "pyxis":
        return []
    env = [f"--container-env={','.join(container.named)}"] if container.named else []
    return [
        f"--container-image={container.image}",
        f"--container-mounts={','.join(container.binds)}",
        f"--container-workdir={container.workdir}",
        *env,
        *container.args,
    ]


def stop_argv(container: Container | None) -> list[str] | None:
    """What removes the run's containers once their launcher is stopped (a killed `podman run` leaves its
    container running); None where nothing outlives the launcher (apptainer's processes are its children)."""
    if container is None or container.runtime != "podman":
        return None
    return ["podman", "rm", "--force", "--time=0", f"--filter=label={LABEL}={container.token}"]


def check(container: Container | None, *, launcher: str, binaries: bool = True) -> None:
    """ConfigError, before anything starts: an apptainer image that is no file, a runtime not installed here
    (binaries: on the launching host), pyxis outside srun."""
    if container is None:
        return
    runtime, image = container.runtime, container.image
    if runtime == "pyxis" and launcher != "srun":
        raise ConfigError(
            f"system.container.runtime=pyxis runs through srun's --container-image, but the ranks start with {launcher}; "
            "set system.launcher=srun and submit with `ddlbench campaign submit`, or use runtime podman or apptainer"
        )
    if runtime in ("apptainer", "singularity") and "://" not in image and not Path(image).expanduser().exists():
        raise ConfigError(
            f"system.container.image={image} is no file: {runtime} runs a .sif image (build one: `apptainer build "
            "ddlbench.sif container/ddlbench.def`, docs/containers.md) or a docker:// reference"
        )
    if binaries and runtime != "pyxis" and shutil.which(runtime) is None:
        raise ConfigError(
            f"system.container.runtime={runtime}: `{runtime}` is not installed on this host; install it (podman: "
            f"`make podman`; apptainer: your site's module), or set system.container.runtime=none"
        )


# --- what a run records of its image -----------------------------------------------------------------------


def _said(argv: Sequence[str]) -> str | None:
    """The first line a command prints, None where it cannot run."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def file_sha256(path: Path, *, cache_dir: Path | None = None) -> str:
    """sha256 of an image file (a .sif, a .sqsh: GBs), computed once per content: cached under cache_dir by the
    file's path, size and modification time."""
    stat = path.stat()
    cache_dir = cache_dir or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddlbench" / "digests"
    key = hashlib.sha256(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:32]
    cached = cache_dir / f"{key}.sha256"
    try:
        return cached.read_text().strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    value = "sha256:" + digest.hexdigest()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        cached.write_text(value + "\n")
    except OSError:
        pass  # no cache: computed again next time
    return value


def provenance(container: Container) -> dict[str, str | None]:
    """meta.json's `container`: the runtime, its version, the image and its digest (podman: the image id and its
    registry digest; a .sif or .sqsh file: its sha256), as the launching host sees them."""
    runtime, image = container.runtime, container.image
    version = _said(["enroot", "version"] if runtime == "pyxis" else [runtime, "--version"])
    digest = repo_digest = None
    if runtime == "podman":
        digest = _said(["podman", "image", "inspect", "--format", "{{.Id}}", image])
        repo_digest = _said(["podman", "image", "inspect", "--format", "{{.Digest}}", image])
    elif "://" not in image and Path(image).expanduser().is_file():
        digest = file_sha256(Path(image).expanduser())
    record = {"runtime": runtime, "runtime_version": version, "image": image, "digest": digest}
    return {**record, **({"repo_digest": repo_digest} if repo_digest else {})}


def environment(container: Container | None) -> dict[str, str]:
    """The variable that hands the container's record to rank 0 (inside, the runtime is not visible)."""
    return {} if container is None else {CONTAINER_ENV: json.dumps(provenance(container), sort_keys=True)}
