"""docs/architecture.md's "How to add" table matches the tree: every path it names exists, for every option
that exists today when the path holds `<name>`."""

from __future__ import annotations

import pytest

from analysis.report import SECTIONS
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.loaders.configs import CONFIGS as LOADERS
from benchmarks.models.configs import Arch
from launchers import programs
from tests.conftest import REPO

SECTION = "## How to add a framework, a loader, a launcher, a model, an analysis"
# the names `<name>` stands for in each row's kind
NAMES = {
    "a framework": sorted(FRAMEWORKS),
    "a loader": sorted(LOADERS),
    "a launcher": sorted(programs.LAUNCHERS),
    "a model": sorted(a.value for a in Arch),
    # an analysis is a module with a section in the report's list
    "an analysis": sorted({draw.__module__.rsplit(".", 1)[-1] for draw in SECTIONS}),
}


def rows() -> list[tuple[str, str]]:
    """(kind, path) of every row of the table; a row without a kind continues the one above."""
    text = (REPO / "docs" / "architecture.md").read_text()
    assert SECTION in text, f"docs/architecture.md has no section {SECTION!r}"
    table = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    out, kind = [], None
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`"):
            continue
        kind = cells[0] or kind
        out.append((kind, cells[1].strip("`")))
    return out


def test_the_table_names_every_kind():
    assert {kind for kind, _ in rows()} == set(NAMES)


@pytest.mark.parametrize(("kind", "path"), rows(), ids=lambda x: str(x))
def test_every_path_exists_for_every_option(kind, path):
    wanted = [path.replace("<name>", name) for name in NAMES[kind]] if "<name>" in path else [path]
    missing = [p for p in wanted if not (REPO / p).exists()]
    assert not missing, f"docs/architecture.md says {kind} has {path}; missing: {missing}"
