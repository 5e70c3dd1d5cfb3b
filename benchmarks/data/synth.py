"""A synthetic ImageNet-like JPEG ImageFolder whose classes are learnable.

Each class has its own colour, stripe orientation and stripe frequency; every image adds its own
phase, jitter and noise. Deterministic for a seed: the same arguments write the same bytes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm

from benchmarks.errors import ConfigError


def class_image(class_id: int, index: int, *, num_classes: int, width: int, height: int, seed: int) -> Image.Image:
    """One image of `class_id`: a pure function of its arguments."""
    class_rng = np.random.default_rng([seed, class_id])
    colour = class_rng.uniform(40, 215, size=3)
    angle = np.pi * class_id / max(1, num_classes)
    frequency = 2 + 6 * class_rng.uniform()
    rng = np.random.default_rng([seed, class_id, index, 1])
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi)
    wave = np.sin(2 * np.pi * frequency * (x * np.cos(angle) + y * np.sin(angle)) / max(width, height) + phase)
    pixels = colour[None, None, :] + 40 * wave[..., None] + rng.normal(0, 12, size=(height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")


def synth_imagefolder(
    out: Path,
    *,
    num_classes: int,
    images_per_class: int,
    width: int,
    height: int,
    quality: int,
    seed: int,
    progress: bool = True,
    first_index: int = 0,
) -> int:
    """Write out/<class>/<index>.jpg for indexes first_index .. first_index + images_per_class - 1; refuses
    a non-empty `out` (nothing is ever overwritten). The classes depend on the seed only, so a held-out
    folder of the same classes is the same seed with first_index past the training folder's images.
    Written into a temporary sibling and renamed at the end, so a crash leaves no half dataset."""
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty; choose a new folder (existing data is never overwritten)")
    for name, value, low, high in (
        ("--classes", num_classes, 1, 100_000),
        ("--per-class", images_per_class, 1, 10_000_000),
        ("--width", width, 8, 8192),
        ("--height", height, 8, 8192),
        ("--quality", quality, 1, 100),
        ("--first-index", first_index, 0, 10_000_000),
    ):
        if not low <= value <= high:
            raise ConfigError(f"{name}={value} must be between {low} and {high}")
    tmp = out.with_name(f".{out.name}.partial{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    total = num_classes * images_per_class
    with tqdm(total=total, desc=f"synth {out.name}", unit="img", disable=not progress) as bar:
        for class_id in range(num_classes):
            class_dir = tmp / f"class_{class_id:05d}"
            class_dir.mkdir(parents=True)
            for index in range(first_index, first_index + images_per_class):
                image = class_image(class_id, index, num_classes=num_classes, width=width, height=height, seed=seed)
                image.save(class_dir / f"{index:07d}.jpg", quality=quality)
                bar.update()
    if out.exists():
        out.rmdir()  # empty, checked above
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, out)
    return total
