"""The image a run's ranks ran in (meta.json's `container`, docs/containers.md), as one text per run: the image,
its runtime and the first digits of its digest ('localhost/ddlbench:25.01 (podman, 75a42a1f0c3d)'), or 'no
container'. The image is the run's software environment, not a setting: it never parts a cell, so a cell whose
repeats ran in different images is marked (analysis.caveats), and `compare` says where the two campaigns, or two
paired cells, ran in different images (`compared_lines`).
"""

from __future__ import annotations

import pandas as pd

NO_CONTAINER = "no container"  # a run outside a container, or one whose meta.json is older than the record
DIGEST_CHARS = 12  # of the digest's hex digits, as podman and docker print an image id
JOINED = " + "  # a cell's (or a campaign's) several images, in one text


def run_images(runs: pd.DataFrame) -> pd.Series:
    """Per run (the runs table's rows): the image it ran in, NO_CONTAINER where meta.json records none."""
    absent = pd.Series(pd.NA, index=runs.index, dtype="object")
    columns = [runs.get(f"meta.container.{k}", absent) for k in ("image", "runtime", "digest")]
    return pd.Series([_text(*values) for values in zip(*columns)], index=runs.index, dtype="object")


def _text(image: object, runtime: object, digest: object) -> str:
    if not isinstance(image, str) or not image:
        return NO_CONTAINER
    said = [v for v in (runtime, digest) if isinstance(v, str) and v]
    if isinstance(digest, str) and digest:
        said[-1] = digest.removeprefix("sha256:")[:DIGEST_CHARS]
    return f"{image} ({', '.join(said)})" if said else image


def joined(images: pd.Series) -> str:
    """Several runs' images as one text: each distinct image once, in order."""
    return JOINED.join(sorted(set(images.dropna().astype(str))))


def cell_images(runs: pd.DataFrame, keys: pd.Series) -> pd.Series:
    """Per key (keys: aligned with runs, e.g. compare's pair keys) the images of its runs, joined."""
    images = pd.Series(run_images(runs).to_numpy(), index=pd.Series(keys).to_numpy())
    return images[images.index.notna()].groupby(level=0).agg(joined)


def differ(table: pd.DataFrame) -> pd.Series:
    """Per row of a comparison (image_a, image_b: cell_images of each side): a paired cell whose two sides ran
    in different images."""
    if "image_a" not in table or "image_b" not in table:
        return pd.Series(False, index=table.index)
    a, b = table["image_a"].fillna("").astype(str), table["image_b"].fillna("").astype(str)
    return (a != "") & (b != "") & (a != b)


def compared_lines(table: pd.DataFrame) -> list[str]:
    """compare's line where A and B ran in different images, or some paired cells did: both sides' images,
    and how many paired cells differ; none where every run of both ran in the same image (or in none)."""
    if "image_a" not in table or "image_b" not in table:
        return []
    sides = [
        sorted({i for text in table[c].dropna().astype(str) if text for i in text.split(JOINED)})
        for c in ("image_a", "image_b")
    ]
    paired = (table["image_a"].fillna("") != "") & (table["image_b"].fillna("") != "")
    different = differ(table)
    if sides[0] == sides[1] and not different.any():
        return []
    line = f"images differ: A ran in {JOINED.join(sides[0]) or '-'}, B in {JOINED.join(sides[1]) or '-'}"
    if different.any():
        line += (
            f"; {int(different.sum())} of {int(paired.sum())} paired cells ran in different images (marked "
            "'image differs'): their deltas measure the change of image as well"
        )
    return [line]
