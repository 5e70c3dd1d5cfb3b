"""Containers (system.container): the argv that runs a launcher or a rank inside the image, per runtime, and
what a run records of the image (meta.json `container`). docs/containers.md says how to use them.

The argv builders are pure functions from the config to a list, checked against each runtime's documented
command line:
- apptainer / singularity: `apptainer exec [--nv] [--bind src:dst[:ro]]... IMAGE CMD` (apptainer.org, "apptainer
  exec" and "Bind Paths and Mounts": `--bind src[:dest[:opts]]`, `--nv` for NVIDIA GPUs; the host environment
  passes in by default, but a variable the image sets wins over the host's unless APPTAINERENV_<NAME> sets it
  ("Environment and Metadata", "Environment Variable Precedence"); $HOME, /tmp and the working directory are
  bound by default);
- pyxis: no prefix, srun flags `--container-image=IMAGE --container-mounts=SRC:DST[:FLAGS],...
  --container-workdir=PATH --container-env=NAME,...` (NVIDIA/pyxis README; the task's environment passes in,
  but the image's values take precedence over all but the names --container-env lists);
- podman: `podman run --rm --network host --ipc host --pid host --label ddlbench.run=TOKEN -e NAME... -v
  src:dst[:ro]... -w DIR IMAGE CMD` (podman-run(1); `-e NAME` passes the variable's value from the
  environment, `-e NAME*` every variable of that prefix). `--pid host`: the pid a rank logs (its log's header)
  is its pid on the host, which is what tells a dead run from a live one (launchers/lifecycle/liveness.py: in a pid
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
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmarks.errors import ConfigError
from benchmarks.runlog import CONTAINER_ENV
from launchers.code_origin import PROJECT, SAFE_PATH, checkout

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
    "PYTHONSAFEPATH",
)
# the rendezvous the ranks must take from their launcher, never from the image: enroot's PyTorch hook writes its
# own MASTER_ADDR and MASTER_PORT into an image that sets PYTORCH_VERSION (NGC's), and an image's ENV may set any
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT")
# apptainer's bind list (`--bind a:b,c:d`) and pyxis's mount list split at commas; every runtime's bind at colons
SEPARATORS = {"apptainer": ",:", "singularity": ",:", "pyxis": ",:", "podman": ":"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Container:
    """The image a run's ranks run in, its binds resolved."""

    runtime: str
    image: str
    binds: tuple[str, ...]  # host:container[:opts], parents first (a deeper mount after the one it lies in)
    env: tuple[str, ...]  # variable names passed in (podman): PASSED, system.env's and system.container.env
    # the names whose launching-side value must win over the image's (pyxis --container-env, apptainer's
    # APPTAINERENV_<NAME>): system.env's, the rendezvous, PYTHONPATH, ddlbench's own DDLBENCH_* and
    # system.container.env's, a NAME* expanded against the launching environment (pyxis takes names only)
    wins: tuple[str, ...]
    setenv: tuple[tuple[str, str], ...]  # system.env: what the launch environment holds besides this process's
    args: tuple[str, ...]
    python: str
    workdir: str
    project: str  # the checkout put first on the ranks' PYTHONPATH; "" where PROJECT is no checkout
    gpus: bool
    token: str  # podman: the label value the stop path finds the run's containers by


@dataclass(frozen=True, slots=True)
class _Bind:
    source: str  # on the host
    dest: str  # inside the image: the path the ranks are given
    opts: str  # "" (read-write), "ro", or a user's own (podman `ro,z`, pyxis `ro+rprivate`)
    key: str  # what asked for it, for the one-line error
    run: bool = False  # the run root or the scratch: where the ranks write, never hidden under another mount

    @property
    def read_only(self) -> bool:
        return "ro" in re.split(r"[,+]", self.opts)

    @property
    def depth(self) -> int:
        return len(PurePosixPath(self.dest).parts)

    def text(self) -> str:
        return ":".join([self.source, self.dest, *([self.opts] if self.opts else [])])


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _shown(path: str | Path) -> tuple[str, str]:
    """(the folder it is on the host, the absolute path the ranks are given): a symlink's target is what gets
    mounted, at the path the ranks open (a dataset linked from /data/imagenet to /lustre/x/imagenet)."""
    given = os.path.abspath(os.path.expanduser(str(path)))
    return str(Path(given).resolve()), given


def _run_binds(*, writable: Sequence[tuple[str, str]], readable: Sequence[tuple[str, str, str]]) -> list[_Bind]:
    """The run's own binds, each once: writable (path, key) read-write at the same path, readable (source,
    destination, key) read-only. A path inside a bound one is left out where it shows the same files and the
    mount it lies in is read-write or read-only as it is: a read-only working directory inside the run root is
    not mounted over the run directory (it is there already, writable)."""
    chosen: dict[str, _Bind] = {}
    for source, dest, key in readable:
        chosen.setdefault(dest, _Bind(source, dest, "ro", key))
    for path, key in writable:
        chosen[path] = _Bind(path, path, "", key, run=True)
    kept: list[_Bind] = []
    for bind in sorted(chosen.values(), key=lambda b: (b.depth, b.dest)):
        around = [k for k in kept if _inside(bind.dest, k.dest)]
        if around:
            outer = around[-1]
            same_files = bind.source == os.path.normpath(
                os.path.join(outer.source, os.path.relpath(bind.dest, outer.dest))
            )
            if same_files and (not outer.read_only or outer.read_only == bind.read_only):
                continue
        kept.append(bind)
    return kept


def _user_bind(text: str) -> _Bind:
    """system.container.binds' host[:container[:opts]]; a bare path is bound at itself (podman would take a lone
    `/p/data` for an anonymous volume, empty)."""
    parts = text.split(":")
    if len(parts) > 3 or not all(parts[:2]):
        raise ConfigError(
            f"system.container.binds entry {text!r} is no host[:container[:opts]]; write it as /host/path, "
            "/host/path:/container/path or /host/path:/container/path:ro"
        )
    source = parts[0]
    dest = parts[1] if len(parts) > 1 else source
    return _Bind(source, dest, parts[2] if len(parts) > 2 else "", "system.container.binds")


def _ordered(run: list[_Bind], user: list[_Bind], *, runtime: str) -> list[str]:
    """Every bind, the run's and the user's, by the depth of its destination (a deeper mount after the one it lies
    in, so none hides another); at one depth the run's writable folders last. ConfigError for a read-only user
    bind over the run root, or a path that the runtime's bind syntax would split."""
    for bind in user:
        under = [r for r in run if r.run and _inside(bind.dest, r.dest)]
        if bind.read_only and under:
            raise ConfigError(
                f"system.container.binds entry {bind.text()} mounts {bind.dest} read-only inside {under[0].dest} "
                f"({under[0].key}), where the ranks write; bind a folder outside it, or drop its ':ro'"
            )
    mine = {b.dest for b in user}  # a user's own bind of a path the run would bind read-only takes its place
    every = [*(b for b in run if b.run or b.dest not in mine), *user]
    for bind in every:
        for path in dict.fromkeys([bind.source, bind.dest]):
            bad = [c for c in SEPARATORS.get(runtime, ":") if c in path]
            if bad:
                raise ConfigError(
                    f"{bind.key}={path} holds {bad[0]!r}, where {runtime}'s bind list splits: it cannot be bound; "
                    "move it, or link it from a path without ',' or ':' and give that path"
                )
    return [b.text() for b in sorted(every, key=lambda b: (b.depth, b.run, b.dest))]


def _image(image: str, runtime: str) -> str:
    """The image as the runtime must be given it: a local file (a .sif, a .sqsh, any path) absolute, `~`
    expanded (pyxis takes a bare ddlbench.sqsh for a registry image, and no runtime expands `~`); a registry
    reference (podman's, an enroot URI nvcr.io#nvidia/pytorch:25.01-py3) or a docker:// URI as it is."""
    if runtime == "podman" or "://" in image or "#" in image:
        return image
    path = Path(image).expanduser()
    local = runtime != "pyxis" or image.startswith(("/", "./", "../", "~")) or image.endswith((".sqsh", ".sif"))
    return str(path.absolute()) if local or path.is_file() else image


def _expand(names: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """Names, a NAME* expanded into the launching environment's variables of that prefix."""
    out: list[str] = []
    for name in names:
        out += sorted(k for k in environ if k.startswith(name[:-1])) if name.endswith("*") else [name]
    return out


def of(
    system: Mapping,
    *,
    run_root: str | Path,
    writable: Mapping[str | Path, str] | None = None,
    readable: Sequence[str | Path | None] = (),
    workdir: str | Path | None = None,
    token: str = "",
    environ: Mapping[str, str] | None = None,
) -> Container | None:
    """The container of system.container, with the run root bound read-write and the project (a checkout), the
    working directory, the user's DDLBENCH_CONFIG folder and `readable` (data.path, where it exists) read-only;
    `writable`: more folders bound read-write, each with the setting that names it (an error names that setting);
    None where system.container.runtime is none. environ: the launching environment (DDLBENCH_CONFIG, NAME*)."""
    from benchmarks.resources import USER_CONFIG_ENV, user_conf_dir

    spec = system["container"]
    runtime = str(spec["runtime"])
    if runtime == "none":
        return None
    if not spec.get("image"):
        raise ConfigError(
            f"system.container.runtime={runtime} needs system.container.image (a .sif file for apptainer, an image "
            "reference for podman, an enroot URI or .sqsh for pyxis); set it, or system.container.runtime=none"
        )
    environ = os.environ if environ is None else environ
    workdir = str(Path(workdir or os.getcwd()).resolve())
    # the project is the ranks' code only where it is a checkout: installed from a wheel, PROJECT is the host's
    # site-packages, which must not lie over the image's own
    project = str(PROJECT) if checkout(PROJECT) is not None else ""
    shown = [(*_shown(p), "data.path") for p in readable if p and Path(_shown(p)[1]).exists()]
    if user_conf_dir(environ) is not None:  # every rank reads it again (benchmarks/__main__.py)
        shown.append((*_shown(environ[USER_CONFIG_ENV]), USER_CONFIG_ENV))
    readable_binds = [*([(project, project, "the project")] if project else []), *shown]
    run = _run_binds(
        writable=[(str(Path(p).resolve()), key) for p, key in {run_root: "run.root", **(writable or {})}.items()],
        readable=[*readable_binds, (workdir, workdir, "the working directory")],
    )
    user = [_user_bind(str(b)) for b in spec.get("binds") or ()]
    profile_env = {str(k): str(v) for k, v in (system.get("env") or {}).items()}
    named = [str(n) for n in spec.get("env") or ()]
    own = [k for k in environ if k.startswith("DDLBENCH_")]
    wins = [*profile_env, *RENDEZVOUS, *(["PYTHONPATH", SAFE_PATH] if project else []), CONTAINER_ENV, *sorted(own)]
    return Container(
        runtime=runtime,
        image=_image(str(spec["image"]), runtime),
        binds=tuple(_ordered(run, user, runtime=runtime)),
        env=tuple(dict.fromkeys([*PASSED, *profile_env, *named])),
        wins=tuple(dict.fromkeys([*wins, *_expand(named, environ)])),
        setenv=tuple(profile_env.items()),
        args=tuple(str(a) for a in spec.get("args") or ()),
        python=str(spec.get("python") or "python3"),
        workdir=workdir,
        project=project,
        gpus=str(system.get("device")) == "cuda",
        token=token,
    )


def for_run(cfg, *, run_dir: Path, token: str) -> Container | None:
    """The container a run's ranks run in (None for none): the run root bound read-write (the run directory where
    run.dir lies outside it), the node-local scratch too where the run stages its data (data.stage=node_local:
    a node's ranks must see the one copy its first rank makes), the project, the working directory and the data
    read-only; `token` labels its containers (podman)."""
    from benchmarks.schema import staging_enabled
    from launchers.lifecycle.staging import scratch_mount

    root = Path(str(cfg.run.root)).resolve()
    staged = staging_enabled(cfg.data)
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
        writable={scratch: "system.local_scratch"} if scratch else None,
        readable=[cfg.data.get("path"), cfg.data.get("val_path")],
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
    """pyxis's srun flags (the image, its mounts, the working directory, and the variables whose task value wins
    over the image's: without --container-env an image's value takes precedence); [] for every other runtime."""
    if container is None or container.runtime != "pyxis":
        return []
    return [
        f"--container-image={container.image}",
        f"--container-mounts={','.join(container.binds)}",
        f"--container-workdir={container.workdir}",
        f"--container-env={','.join(container.wins)}",  # a name the task does not set is skipped (pyxis)
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


def environment(
    container: Container | None, environ: Mapping[str, str] | None = None, *, record: bool = True
) -> dict[str, str]:
    """What the launch environment gains for the ranks inside the image: the variable that hands the container's
    record to rank 0 (inside, the runtime is not visible; record=False leaves it out), PYTHONPATH with the
    checkout first (else `python -m benchmarks` imports the image's copy, frozen at its build, wherever the
    working directory is not the checkout), DDLBENCH_CONFIG as the absolute path it is bound at, and for
    apptainer / singularity an APPTAINERENV_<NAME> (SINGULARITYENV_<NAME>) copy of each name that must win: a host
    variable does not override one the image sets, those do. environ: the environment the runtime starts in
    (default: this process's, system.env over it); podman (-e NAME) and pyxis (--container-env) take the values
    from it by name."""
    from benchmarks.resources import USER_CONFIG_ENV

    if container is None:
        return {}
    environ = {**os.environ, **dict(container.setenv)} if environ is None else dict(environ)
    added = {CONTAINER_ENV: json.dumps(provenance(container), sort_keys=True)} if record else {}
    if container.project:
        paths = [container.project, *(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
        added["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        added[SAFE_PATH] = "1"  # Python 3.11+: the working directory (a second checkout) is not put before it
    if environ.get(USER_CONFIG_ENV):
        added[USER_CONFIG_ENV] = _shown(environ[USER_CONFIG_ENV])[1]
    if container.runtime in ("apptainer", "singularity"):
        values = {**environ, **added}
        prefix = f"{container.runtime.upper()}ENV_"
        added.update({prefix + name: values[name] for name in container.wins if name in values})
    return added
