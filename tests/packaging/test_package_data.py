"""Every file the tool reads at run time is named by pyproject's package-data, so the wheel carries it
(an experiment's config group two folders deep, conf/experiment/composable_mode/, was left out once)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_config_and_reference_file_is_package_data():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = REPO / "benchmarks" / "_shipped"
    wanted = {
        "benchmarks": [p.relative_to(REPO / "benchmarks") for p in (shipped / "conf").rglob("*.yaml")],
        "analysis": [p.relative_to(REPO / "analysis") for p in (REPO / "analysis" / "reference").glob("*.csv")],
    }
    for package, files in wanted.items():
        assert files, package
        for path in files:
            # a glob matches whole path components, one per '*': the depth must match too
            assert any(len(path.parts) == len(Path(glob).parts) and path.match(glob) for glob in data[package]), (
                f"{package}/{path} is in no package-data glob of pyproject.toml: the wheel would lack it"
            )
