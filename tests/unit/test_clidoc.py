"""docs/cli.md is the parsers' own help: a change to a command's options changes the file."""

from __future__ import annotations

from pathlib import Path

from ddlbench.clidoc import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_command_reference_is_what_the_parsers_print():
    assert DOC.read_text() == render(), "docs/cli.md is stale: run `make docs-cli` and commit it"


def test_every_command_has_its_section():
    text = DOC.read_text()
    for command in ("run", "results", "report", "paper", "compare", "campaign plan", "stash run", "predict"):
        assert f"\n## ddlbench {command}\n" in text
