"""The image a run's ranks ran in (analysis/container_images.py, meta.json's `container`): `results` marks a cell whose
repeats ran in different images, and `compare` names both sides' images in one line where the campaigns, or
paired cells, ran in different ones (a cell on each side marked 'image differs'). On synthetic logs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from analysis.campaign_analysis import CampaignAnalysis
from analysis.caveats import short
from analysis.load import LogWarning
from analysis.report import format_compare
from analysis.results import format_results, results_table
from tests.analysis.test_labels import tour

PODMAN = {
    "runtime": "podman",
    "runtime_version": "podman version 4.3.1",
    "image": "localhost/ddlbench:25.01",
    "digest": "75a42a1f0c3d9e8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b",
}
SIF = {
    "runtime": "apptainer",
    "runtime_version": "apptainer version 1.3.4",
    "image": "/p/project/ddlbench.sif",
    "digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
}
PODMAN_TEXT = "localhost/ddlbench:25.01 (podman, 75a42a1f0c3d)"
SIF_TEXT = "/p/project/ddlbench.sif (apptainer, 0123456789ab)"


def in_image(root: Path, record: dict | None, *, only: str = "") -> None:
    """meta.json's `container` of the runs whose directory name holds `only` (None: no container)."""
    for meta_path in root.rglob("meta.json"):
        if only in meta_path.parent.name:
            meta = json.loads(meta_path.read_text())
            meta.pop("container", None)
            meta_path.write_text(json.dumps(meta | ({"container": record} if record else {})))


def compared(a: Path, b: Path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        return format_compare(CampaignAnalysis(a).compare(CampaignAnalysis(b)), threshold=0.05)


def test_results_marks_a_cell_whose_repeats_ran_in_different_images(tmp_path):
    root = tour(tmp_path / "runs", repeats=2)
    in_image(root, PODMAN)
    (r1,) = [
        r for r in (root / "synth").iterdir() if "-native-" in r.name and "-g2-" in r.name and r.name.endswith("-r1")
    ]
    in_image(root, SIF, only=r1.name)
    table, excluded = results_table(root)
    marks = dict(zip(zip(table["loader"], table["ranks (CPU)"]), table["marks"].map(short)))
    assert marks == {("native", 1): "", ("native", 2): "mixed images", ("synthetic", 1): "", ("synthetic", 2): ""}
    text = format_results(table, excluded, long=True)
    assert (
        f"mixed images: {SIF_TEXT} in 1, {PODMAN_TEXT} in 1 of 2 repeats: repeats must be one configuration, so the "
        "median and interval mix the images' difference with the run-to-run noise; run the cell again in one image"
    ) in text.splitlines(), text
    # one image throughout, or none: no mark
    in_image(root, None)
    table, _ = results_table(root)
    assert "marks" not in table


def test_compare_names_both_sides_images_and_marks_the_paired_cells_that_differ(tmp_path):
    a, b = tour(tmp_path / "a", campaign="a"), tour(tmp_path / "b", campaign="b")
    assert "images differ" not in compared(a, b)  # neither ran in a container
    in_image(b, PODMAN)
    text = compared(a, b)
    assert (
        f"images differ: A ran in no container, B in {PODMAN_TEXT}; 4 of 4 paired cells ran in different images "
        "(marked 'image differs'): their deltas measure the change of image as well"
    ) in text.splitlines(), text
    rows = [line for line in text.splitlines() if line.lstrip().startswith("ddp ")]
    assert len(rows) == 4 and all("image differs" in row for row in rows), text
    # the same image on both sides: nothing said
    in_image(a, PODMAN)
    assert "image" not in compared(a, b)
    # one cell of B rebuilt (another digest): that paired cell alone
    (run,) = [r for r in (b / "b").iterdir() if "-synthetic-" in r.name and "-g1-" in r.name]
    in_image(b, PODMAN | {"digest": "ffffffffffff" + "0" * 52}, only=run.name)
    text = compared(a, b)
    line = next(line for line in text.splitlines() if line.startswith("images differ"))
    assert line.startswith(
        f"images differ: A ran in {PODMAN_TEXT}, B in {PODMAN_TEXT} + localhost/ddlbench:25.01 (podman, ffffffffffff); "
        "1 of 4 paired cells"
    ), line
    marked = [row for row in text.splitlines() if "image differs" in row and not row.startswith("images differ")]
    assert len(marked) == 1 and " synthetic " in marked[0], text
