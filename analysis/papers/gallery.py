"""The gallery: docs/papers/<study>.md and docs/papers/<study>/figures/, `ddlbench paper` over the runs
committed under docs/papers/runs/<study>/ (CPU miniatures, the 1-GPU runs of docs/results, predictions).
`make papers` runs it; tests/analysis/test_gallery.py checks that the committed pages are what it makes.

    python -m analysis.papers.gallery [DOCS_PAPERS_DIR]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from analysis.papers import STUDIES
from analysis.papers.build import build_paper

# what each study's relative figures are against in the committed runs
BASELINES = {"composable2023": {"system": "local_cpu"}}


def page(name: str, paper_md: str) -> str:
    """paper.md as docs/papers/<name>.md: figure links into <name>/figures/."""
    return paper_md.replace("](figures/", f"]({name}/figures/")


def make(docs: Path, *, names: list[str] | None = None, write: bool = True) -> dict[str, str]:
    """Each study's page text from docs/runs/<study> (relative paths, so the text is the same wherever the
    repository lies); with `write`, the pages and their figures replace the committed ones."""
    pages = {}
    for name in names or list(STUDIES):
        runs = docs / "runs" / name
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / name
            build_paper(name, runs, out, baseline=BASELINES.get(name, {}), jobs=1, draw=write)
            pages[name] = page(name, (out / "paper.md").read_text())
            if write:
                shutil.rmtree(docs / name, ignore_errors=True)
                shutil.copytree(out / "figures", docs / name / "figures")
                (docs / f"{name}.md").write_text(pages[name])
        print(f"[ddlbench] gallery: {name} from {runs}", file=sys.stderr)
    return pages


if __name__ == "__main__":
    make(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/papers"))
