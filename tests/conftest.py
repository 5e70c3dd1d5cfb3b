"""Shared fixtures: the real Hydra config, a helper that starts `ddlbench` as users do, one that finds a
run directory by its readable name, and the fixtures that say what a test needs.

What a test needs is said by the fixtures it uses, never by a hand-kept mark: a test that asks for one of
the fixtures in NEEDS (itself, or through another fixture) gets that fixture's marker, and is skipped, with
the command that installs what is missing, where this machine lacks it. A parametrized case that selects a
framework or loader by an override ("framework=deepspeed") gets that component's marker the same way. The
tiers select on these markers (Makefile: test-fast, test, test-matrix)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

# Hypothesis's example count per property: 40 by default (`make test`), 10 under --hypothesis-profile=fast
settings.register_profile("full", max_examples=40)
settings.register_profile("fast", max_examples=10)
settings.load_profile("full")


def _module(name: str, install: str) -> Callable[[], str | None]:
    def missing() -> str | None:
        found = importlib.util.find_spec(name.partition(".")[0]) is not None and importlib.util.find_spec(name)
        return None if found else f"{name} is not installed: run '{install}'"

    return missing


def _program(name: str, install: str) -> Callable[[], str | None]:
    return lambda: None if shutil.which(name) else f"{name} is not on PATH: {install}"


def _slurm() -> str | None:
    from tests.slurm.cluster import slurm_problem

    return slurm_problem()


def _netns() -> str | None:
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    from launchers import netns

    caps = netns.capabilities()
    if caps["netns"]:
        return f"network namespaces are not permitted here: {caps['netns']}"
    if caps["tbf"]:
        return f"tc tbf is not available here: {caps['tbf']}"
    return None


def _podman() -> str | None:
    missing = [p for p in ("podman", "runc") if shutil.which(p) is None]
    if not os.access("/bin/busybox", os.X_OK):
        missing.append("busybox")
    return f"no {', '.join(missing)}: run 'make podman'" if missing else None


@dataclass(frozen=True, slots=True)
class Need:
    """A fixture's marker (None: no marker of its own) and why it cannot run here (None: it can)."""

    marker: str | None
    missing: Callable[[], str | None]


NEEDS: dict[str, Need] = {
    "ddlbench": Need("multiproc", lambda: None),  # the CLI in this process: a run starts its launcher and ranks
    "ddlbench_process": Need("multiproc", lambda: None),  # the CLI in a fresh Python (+ torch), and its ranks
    "rank_processes": Need("multiproc", lambda: None),  # a test that starts ranks or the CLI by its own means
    "rank_here": Need("multiproc", lambda: None),  # a rank's run in the test's own process (maxbatch's probes)
    "deepspeed": Need("deepspeed", _module("deepspeed", "make deepspeed")),
    "horovod": Need("horovod", _module("horovod.torch", "make horovod")),
    "dali": Need("dali", _module("nvidia.dali", "make dali")),
    "transformers": Need(None, _module("transformers", "make nlp")),
    "mpirun": Need(None, _program("mpirun", "apt-get install openmpi-bin libopenmpi-dev (make mpi)")),
    "chromium": Need("browser", lambda: None if CHROMIUM else "no chromium: run 'make browser'"),
    "slurm_up": Need("slurm", _slurm),
    "netns_hosts": Need("netns", _netns),
    "podman_image": Need("container", _podman),
}
# a parametrized case whose parameters hold one of these overrides needs that fixture's component
OVERRIDE_NEEDS = {
    "framework=deepspeed": "deepspeed",
    "framework=horovod": "horovod",
    "loader=dali": "dali",
    "framework.local_launcher=mpirun": "mpirun",
}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@functools.cache
def _why_missing(fixture: str) -> str | None:
    return NEEDS[fixture].missing()


def _override_needs(item: pytest.Item) -> set[str]:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return set()
    words: list[str] = []
    for name, value in callspec.params.items():
        words.extend(value if isinstance(value, (list, tuple)) else [value, f"{name}={value}"])
    return {OVERRIDE_NEEDS[w] for w in words if isinstance(w, str) and w in OVERRIDE_NEEDS}


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marks put on here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouped = bool(config.getoption("loadgroup", default=False))  # pytest-xdist's --dist loadgroup, in its workers too
    for item in items:
        if grouped:
            item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
        needed = [name for name in NEEDS if name in item.fixturenames] + sorted(_override_needs(item))
        for name in dict.fromkeys(needed):
            need = NEEDS[name]
            if need.marker:
                item.add_marker(need.marker)
            why = _why_missing(name)
            if why:
                item.add_marker(pytest.mark.skip(reason=why))
    if grouped:
        # the long tests first, the quick ones last: xdist hands out work in this order, and quick tests
        # fill a worker's idle end where a long module would leave the other core waiting
        items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in ("multiproc", "slurm", "netns")))


@pytest.fixture(scope="session")
def rank_processes() -> None:
    """The test starts the CLI or ranks in fresh processes by its own means (a signal to send, another
    Python, a network namespace), so it is a multiproc test like those that use `ddlbench`."""


@pytest.fixture(scope="session")
def rank_here() -> None:
    """The test trains a rank in its own process (launchers.lifecycle.rank.run_here, as `ddlbench maxbatch` probes one
    GPU): a training run, so a multiproc test like those that start ranks."""


# under pytest-xdist (-n 2 --dist loadgroup), the tests that share one of these go to one worker, one after
# another: the session's shared runs are made once; one Slurm queue (--max-jobs counts its jobs); one
# 10.77.0.0/24 for the namespace hosts
SERIAL_GROUPS = {"shared_runs": "shared_runs", "slurm_up": "slurm", "netns_hosts": "netns"}


def _xdist_group(item: pytest.Item) -> str:
    """The worker group of a test: its module's XDIST_GROUP where set (a module whose tests share both a
    module fixture and a resource), a shared resource's, else its module's (a module fixture is made once)."""
    fallback = getattr(item.module, "XDIST_GROUP", item.module.__name__)
    return next((g for fixture, g in SERIAL_GROUPS.items() if fixture in item.fixturenames), fallback)


@pytest.fixture(scope="session")
def deepspeed() -> None:
    """The test runs DeepSpeed (skipped, with `make deepspeed`, where it is not installed)."""


@pytest.fixture(scope="session")
def horovod() -> None:
    """The test runs Horovod (skipped, with `make horovod`, where it is not built)."""


@pytest.fixture(scope="session")
def dali() -> None:
    """The test runs NVIDIA DALI's CPU pipelines (skipped, with `make dali`, where it is not installed)."""


@pytest.fixture(scope="session")
def transformers() -> None:
    """The test builds a Hugging Face model (skipped, with `make nlp`, where transformers is missing)."""


@pytest.fixture(scope="session")
def mpirun() -> None:
    """The test starts ranks with OpenMPI's mpirun (skipped where it is not on PATH)."""


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's chromium, for the report's browser test (`make browser`)."""
    return CHROMIUM


@pytest.fixture(scope="session")
def slurm_up() -> None:
    """The local Slurm cluster answers (slurm/local_cluster.sh up; `make slurm-up`)."""


# the container tests' image: a busybox root file system (with /tmp), the rest bound from the host (tests/multiproc/
# test_podman.py); built once per machine, as podman keeps it
PODMAN_IMAGE = "localhost/ddlbench-test:busybox-1"


@pytest.fixture(scope="session")
def podman_image(tmp_path_factory) -> str:
    """A local podman image (no registry): busybox and an empty /tmp, imported when podman has none (make podman)."""
    if subprocess.run(["podman", "image", "exists", PODMAN_IMAGE]).returncode != 0:
        root = tmp_path_factory.mktemp("rootfs")
        (root / "bin").mkdir()
        shutil.copy("/bin/busybox", root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        (root / "tmp").mkdir(mode=0o1777)
        (root / "tmp").chmod(0o1777)
        tar = root.parent / "rootfs.tar"
        subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
        subprocess.run(["podman", "import", "-q", str(tar), PODMAN_IMAGE], check=True, capture_output=True)
    return PODMAN_IMAGE


@pytest.fixture(scope="session")
def netns_hosts() -> None:
    """This machine may create network namespaces, veth links and tc qdiscs (root, iproute2)."""


def run_cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run the ddlbench CLI in a subprocess (the real launcher path), capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "ddlbench.cli", *args],
        cwd=cwd or REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@contextlib.contextmanager
def _output_to(out, err):
    """This process's stdout and stderr, Python's and file descriptors 1 and 2 (which the launcher and its ranks
    inherit), into the files `out` and `err`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield
    finally:
        out.flush()
        err.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)


def run_main(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`ddlbench ARGS` as `main(argv)` in this process, its output (and its launcher's and ranks') captured:
    what a subprocess would prove nothing more about, without a fresh Python + torch to start. A run's
    launcher and ranks are still processes of their own. `env` is set for the call only."""
    from ddlbench.cli import main

    saved_env = dict(os.environ)
    os.environ.update(env or {})
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            with _output_to(out, err):
                try:
                    code = main(list(args))
                except SystemExit as exit_:  # argparse's errors and --help
                    code = exit_.code if isinstance(exit_.code, int) else 2
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(["ddlbench", *args], code, out.read(), err.read())


@pytest.fixture
def no_slurm(monkeypatch) -> None:
    """This machine without Slurm's commands (squeue, sbatch, sacct, scontrol), whatever it has: the
    campaign commands that work off a cluster, tested the same here and on a Slurm host."""
    real = shutil.which
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name, *a, **k: None if name in ("squeue", "sbatch", "sacct", "scontrol") else real(name, *a, **k),
    )


@pytest.fixture(scope="session")
def ddlbench() -> Callable[..., subprocess.CompletedProcess]:
    """`run_main`: the ddlbench CLI in this process, for commands that start a launcher and ranks (a run, a
    campaign, commbench); marks the test multiproc. Its result is a subprocess.CompletedProcess."""
    return run_main


@pytest.fixture(scope="session")
def ddlbench_process() -> Callable[..., subprocess.CompletedProcess]:
    """`run_cli`: the ddlbench CLI in a fresh Python, as users start it, for what only a fresh process shows
    (another PYTHONPATH, a module made unimportable, the exit of the whole command)."""
    return run_cli


@pytest.fixture(scope="session")
def cli() -> Callable[..., subprocess.CompletedProcess]:
    """`run_main` for commands that start no process (plan, results, report, compare, predict, --dry-run,
    a refused override): fast-tier tests use it."""
    return run_main


# a small, quick run: the same seed and synthetic data for every framework, parameters saved to compare them
SMALL_RUN = (
    "model=simple_cnn",
    "loader=synthetic",
    "run.per_gpu_batch=8",
    "run.warmup_steps=1",
    "run.steps=3",
    "run.log_every=0",
    "run.save_params=true",
)


# the readable part of a run directory's name, as tests spell it: <framework>-<loader>-<model>-g<W>-n<N>-b<B>-r<R>
_READABLE = re.compile(r"(?P<head>[a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+)-g(?P<g>\d+)-n(?P<n>\d+)-b(?P<b>\d+)-r(?P<r>\d+)")


def run_name_pattern(name: str) -> re.Pattern:
    """The full directory name (benchmarks/rundir/ dir_name) of a readable name such as
    ddp-synthetic-simple_cnn-g2-n1-b4-r0: <fw>-<loader>-<model>-<precision>-g2-n1-b4-<8 hex cell hash>-r0."""
    m = _READABLE.fullmatch(name)
    assert m, f"{name!r} is not <framework>-<loader>-<model>-g<W>-n<N>-b<B>-r<R>"
    return re.compile(rf"{re.escape(m['head'])}-[a-z0-9_]+-g{m['g']}-n{m['n']}-b{m['b']}-[0-9a-f]{{8}}-r{m['r']}")


def find_run(parent: Path, name: str) -> Path:
    """The single run directory in `parent` whose name is the readable `name`
    (<framework>-<loader>-<model>-g<W>-n<N>-b<B>-r<R>) with a precision and a cell hash in it."""
    pattern = run_name_pattern(name)
    there = sorted(p.name for p in parent.iterdir()) if parent.is_dir() else []
    matches = [n for n in there if pattern.fullmatch(n) and (parent / n).is_dir()]
    assert len(matches) == 1, (
        f"expected exactly one run directory like {name} "
        f"(pattern {pattern.pattern}) in {parent}; found {len(matches)}; "
        f"{parent} holds: {there if parent.is_dir() else 'nothing (no such directory)'}"
    )
    return parent / matches[0]


class SharedRuns:
    """`ddlbench run` once per set of overrides in the whole test session: the tests of every file that ask
    for the same configuration read one run (its directory is read-only to them). Call it with the overrides,
    get the run directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs: dict[tuple[str, ...], Path] = {}
        self.outputs: dict[Path, str] = {}  # run directory -> the CLI's stderr

    def __call__(self, *overrides: str) -> Path:
        if overrides not in self.runs:
            campaign = f"c{len(self.runs)}"
            result = run_main("run", *overrides, f"run.root={self.root}", f"run.campaign={campaign}")
            assert result.returncode == 0, result.stderr[-4000:]
            (run_dir,) = (self.root / campaign).iterdir()
            self.runs[overrides] = run_dir
            self.outputs[run_dir] = result.stderr
        return self.runs[overrides]

    def stderr(self, run_dir: Path) -> str:
        """What `ddlbench run` printed on stderr while it made this run."""
        return self.outputs[run_dir]


@pytest.fixture(scope="session")
def shared_runs(ddlbench, tmp_path_factory) -> SharedRuns:
    """The session's runs, each made once (SharedRuns)."""
    return SharedRuns(tmp_path_factory.mktemp("shared_runs"))


def read_params(run_dir: Path, rank: int) -> dict:
    """params_rank<R>.pt of a run with run.save_params=true."""
    import torch

    return torch.load(run_dir / f"params_rank{rank}.pt")


def read_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


@pytest.fixture
def compose():
    from benchmarks.config import compose as compose_config

    return compose_config


def cpu_loader_context(
    *,
    data_path,
    rank: int = 0,
    world_size: int = 1,
    per_gpu_batch: int = 4,
    image_size: int = 32,
    channels_last: bool = False,
    num_classes: int = 4,
):
    """A LoaderContext on the CPU, as a run builds it, for loader tests."""
    import torch

    from benchmarks.loaders.base import LoaderContext

    return LoaderContext(
        rank=rank,
        world_size=world_size,
        device=torch.device("cpu"),
        per_gpu_batch=per_gpu_batch,
        seed=0,
        num_classes=num_classes,
        image_size=image_size,
        channels_last=channels_last,
        data_path=str(data_path),
    )


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(i * i for i in range(10_000))


@contextlib.contextmanager
def cpu_loaded(processes: int | None = None):
    """A busy process per core (or `processes` of them) while the block runs: a loaded machine's timing
    (tests/multiproc/test_horovod.py, perf/rounding_cpu.py)."""
    procs = [
        multiprocessing.Process(target=_spin, args=(3600,), daemon=True)
        for _ in range(processes or multiprocessing.cpu_count())
    ]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def process_ends_within(pid: int, *, seconds: float) -> bool:
    """`pid` is gone, or a zombie its parent has not reaped yet (killed all the same), within `seconds`: a killed
    process's reaping takes its time on a loaded machine."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False
