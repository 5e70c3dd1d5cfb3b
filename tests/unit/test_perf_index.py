"""perf/README.md indexes perf/: every script there is a row of its table, every row a script there, and the
historical ones named as removed are gone (git history keeps them; the table names the commit)."""

from __future__ import annotations

import re
from pathlib import Path

PERF = Path(__file__).resolve().parents[2] / "perf"


def _tables() -> tuple[list[list[str]], list[list[str]]]:
    text = (PERF / "README.md").read_text()
    scripts, historical = text.split("## The scripts", 1)[1].split("## Historical", 1)

    def rows(section: str) -> list[list[str]]:
        lines = [line for line in section.splitlines() if line.startswith("| `")]
        return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]

    return rows(scripts), rows(historical)


def test_every_file_in_perf_is_in_the_table_and_every_row_is_a_file():
    current, _ = _tables()
    named = [re.fullmatch(r"`([\w.]+)`", row[0]).group(1) for row in current]
    assert len(named) == len(set(named)), "a script has two rows"
    files = {p.name for p in PERF.iterdir() if p.is_file() and p.name != "README.md"}
    assert files - set(named) == set(), f"in perf/ but not in perf/README.md: {sorted(files - set(named))}"
    assert set(named) - files == set(), f"in perf/README.md but not in perf/: {sorted(set(named) - files)}"


def test_every_row_says_where_it_runs_and_whether_it_is_maintained():
    current, historical = _tables()
    for row in current:
        assert len(row) == 6, row
        assert row[4].split()[0].rstrip(";") in ("CPU", "GPU", "2"), row
        assert row[5] == "maintained", row  # the one-offs leave the tree: the historical table names them
    for row in historical:
        assert re.fullmatch(r"[0-9a-f]{7,40}", row[-1]), row
        for name in re.findall(r"`([\w.]+)`", row[0]):
            assert not (PERF / name).exists(), f"{name} is listed as removed but is in perf/"
