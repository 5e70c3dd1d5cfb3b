"""The papers' gallery is what `make papers` makes from the committed runs: each docs/papers/<study>.md is
`ddlbench paper` over docs/papers/runs/<study>, and lists every figure and table of its study."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.papers import STUDIES
from analysis.papers.gallery import make

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(STUDIES))
def test_the_committed_page_is_what_the_committed_runs_make(name, monkeypatch):
    monkeypatch.chdir(REPO)  # the pages name their runs by the path relative to the checkout
    page = make(Path("docs/papers"), names=[name], write=False)[name]
    committed = (REPO / "docs" / "papers" / f"{name}.md").read_text()
    assert page == committed, f"docs/papers/{name}.md is stale: run `make papers` and commit it"
    contents = committed.split("## Contents", 1)[1].split("\n## ", 1)[0]
    for exhibit in STUDIES[name].exhibits:
        assert f"| {exhibit.id} |" in contents
    for line in committed.splitlines():
        if line.startswith("!["):
            figure = line.split("](", 1)[1].split(")", 1)[0]
            assert (REPO / "docs" / "papers" / figure).is_file(), figure
