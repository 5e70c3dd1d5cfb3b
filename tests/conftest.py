"""Shared fixtures: the real Hydra config, and a helper that starts `ddlbench` as users do."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def ddlbench(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the ddlbench CLI in a subprocess (the real launcher path), capturing its output."""
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", *args], cwd=cwd or REPO, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, **(env or {})},
    )


def read_summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


@pytest.fixture
def compose():
    from benchmarks.config import compose as compose_config

    return compose_config
