"""Shared fixtures: the real Hydra config, a helper that starts `ddlbench` as users do, and one that finds
a run directory by its readable name; the skip mark of the tests that need DeepSpeed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# the tests that run DeepSpeed: skipped, with the install command, where it is not installed
needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed: run 'make deepspeed'"
)

REPO = Path(__file__).resolve().parent.parent


def ddlbench(
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


# the readable part of a run directory's name, as tests spell it: <framework>-<loader>-<model>-g<W>-n<N>-b<B>-r<R>
_READABLE = re.compile(r"(?P<head>[a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+)-g(?P<g>\d+)-n(?P<n>\d+)-b(?P<b>\d+)-r(?P<r>\d+)")


def run_name_pattern(name: str) -> re.Pattern:
    """The full directory name (benchmarks/rundir.py dir_name) of a readable name such as
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


class RunsOnce:
    """`ddlbench run` with a test file's common overrides plus a test's own, once per set of overrides in a
    session (several tests read one run); call it with the root and the overrides, get the run directory."""

    def __init__(self, common: list[str]) -> None:
        self.common = common
        self.runs: dict[tuple[str, ...], Path] = {}

    def __call__(self, root: Path, *overrides: str) -> Path:
        if overrides not in self.runs:
            campaign = f"c{len(self.runs)}"
            result = ddlbench("run", *self.common, *overrides, f"run.root={root}", f"run.campaign={campaign}")
            assert result.returncode == 0, result.stderr[-4000:]
            (run_dir,) = (root / campaign).iterdir()
            self.runs[overrides] = run_dir
        return self.runs[overrides]


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
