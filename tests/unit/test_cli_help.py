"""Every `ddlbench ... --help` page renders (argparse formats help lazily: a stray % breaks it)."""

import argparse

from ddlbench.cli import build_parser


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_help_page_renders():
    pages = [p.format_help() for p in _parsers(build_parser())]
    assert len(pages) > 10
    assert all("usage: ddlbench" in page for page in pages)


def test_hydra_multirun_is_refused_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "-m", "run.per_gpu_batch=8,16"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("ddlbench: error: -m/--multirun is not supported")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "multirun").exists()
