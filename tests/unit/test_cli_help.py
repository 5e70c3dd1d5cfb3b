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
