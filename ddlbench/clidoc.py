"""docs/cli.md: every `ddlbench` command's --help, from the parsers themselves (so the reference cannot
drift from the code: tests/unit/test_clidoc.py compares the committed file with what this makes).

    python -m ddlbench.clidoc > docs/cli.md      (make docs-cli)
"""

from __future__ import annotations

import argparse
import os

WIDTH = 100  # the help's line width, whatever the terminal that makes the file


def _subcommands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, argparse.ArgumentParser]]:
    """(full command, parser) for the parser and every subcommand below it, in the order they were added; a
    command registered without a help line (an old name kept for a release) gets no section."""
    found = [(prefix, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name in listed:
                    found += _subcommands(sub, f"{prefix} {name}")
    return found


def render() -> str:
    from ddlbench.cli import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        parts = [
            "# ddlbench: the command reference",
            "",
            "Every command's `--help`, generated from the parsers by `make docs-cli` (`python -m ddlbench.clidoc`);",
            "a test fails when this file and the code disagree. The README shows the commands in use.",
        ]
        for command, parser in _subcommands(build_parser(), "ddlbench"):
            parts += ["", f"## {command}", "", "```text", parser.format_help().rstrip(), "```"]
        return "\n".join(parts) + "\n"
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


if __name__ == "__main__":
    print(render(), end="")
