"""`ddlbench data synth`: deterministic for a seed, learnable classes, never overwrites."""

import hashlib

import numpy as np
import pytest
from PIL import Image

from benchmarks.data.synth import synth_imagefolder
from benchmarks.errors import ConfigError


def _digest(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*.jpg"))
    }


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    kwargs = dict(num_classes=3, images_per_class=4, width=32, height=24, quality=90, progress=False)
    synth_imagefolder(tmp_path / "a", seed=7, **kwargs)
    synth_imagefolder(tmp_path / "b", seed=7, **kwargs)
    synth_imagefolder(tmp_path / "c", seed=8, **kwargs)
    a, b, c = (_digest(tmp_path / n) for n in "abc")
    assert a == b and len(a) == 12
    assert a != c


def test_a_held_out_folder_continues_the_numbering_of_the_same_classes(tmp_path):
    """--first-index: the held-out images are new images of the same classes (the classes follow the seed)."""
    kwargs = dict(num_classes=2, width=32, height=24, quality=90, seed=3, progress=False)
    synth_imagefolder(tmp_path / "all", images_per_class=6, **kwargs)
    synth_imagefolder(tmp_path / "val", images_per_class=2, first_index=4, **kwargs)
    every, held = _digest(tmp_path / "all"), _digest(tmp_path / "val")
    assert sorted(held) == ["class_00000/0000004.jpg", "class_00000/0000005.jpg", "class_00001/0000004.jpg",
                            "class_00001/0000005.jpg"]  # fmt: skip
    assert all(every[name] == digest for name, digest in held.items())


def test_classes_are_separable_by_their_mean_colour(tmp_path):
    """Not pure noise: a nearest-class-mean classifier on the mean RGB already beats chance by far."""
    synth_imagefolder(
        tmp_path / "d", num_classes=4, images_per_class=10, width=48, height=32, quality=90, seed=0, progress=False
    )
    features = {
        c: [
            np.asarray(Image.open(p), dtype=np.float32).mean(axis=(0, 1))
            for p in sorted((tmp_path / "d" / f"class_{c:05d}").glob("*.jpg"))
        ]
        for c in range(4)
    }
    centres = {c: np.mean(f, axis=0) for c, f in features.items()}
    correct = sum(
        min(centres, key=lambda k: np.linalg.norm(x - centres[k])) == c for c, f in features.items() for x in f
    )
    assert correct / 40 >= 0.9


def test_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="is not empty; choose a new folder"):
        synth_imagefolder(
            tmp_path / "e", num_classes=1, images_per_class=1, width=8, height=8, quality=90, seed=0, progress=False
        )
    assert (tmp_path / "e" / "keep.txt").read_text() == "mine"
