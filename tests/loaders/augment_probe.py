"""Images whose pixels say where they came from, to read a loader's crop box and flip off its output:
red rises with x, green with y. Shared by the augmentation tests of tests/loaders and tests/dali."""

from __future__ import annotations

from pathlib import Path

import torch

from benchmarks.loaders.native import IMAGENET_MEAN, IMAGENET_STD

WIDTH, HEIGHT = 240, 180  # 4:3, as the seed study's 500x375 JPEGs


def write_probe_folder(root: Path, *, images: int = 50) -> Path:
    """An ImageFolder of `images` identical gradient JPEGs (one class)."""
    import numpy as np
    from PIL import Image

    x = np.linspace(0, 255, WIDTH)[None, :].repeat(HEIGHT, 0)
    y = np.linspace(0, 255, HEIGHT)[:, None].repeat(WIDTH, 1)
    rgb = np.stack([x, y, np.full_like(x, 128)], axis=-1).round().astype("uint8")
    folder = root / "probe"
    folder.mkdir(parents=True)
    for i in range(images):
        Image.fromarray(rgb).save(folder / f"{i:04d}.jpg", quality=95)
    return root


def crop_of(image: torch.Tensor) -> tuple[float, float, bool]:
    """(area share, aspect w/h, flipped) of the crop one normalised CHW output image shows: the crop's
    width and height from the slopes of red across columns and green across rows in its middle half."""
    rgb = image.float() * torch.tensor(IMAGENET_STD).view(3, 1, 1) + torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    size = rgb.shape[-1]
    a, b = size // 4, 3 * size // 4
    red, green = rgb[0].mean(dim=0), rgb[1].mean(dim=1)
    width = (red[b] - red[a]).item() / (b - a) * size * (WIDTH - 1) / 255
    height = (green[b] - green[a]).item() / (b - a) * size * (HEIGHT - 1) / 255
    return abs(width) * height / (WIDTH * HEIGHT), abs(width) / height, width < 0


def ks_statistic(a: list[float], b: list[float]) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    a, b = sorted(a), sorted(b)
    i = j = 0
    gap = 0.0
    while i < len(a) and j < len(b):
        value = min(a[i], b[j])
        while i < len(a) and a[i] <= value:
            i += 1
        while j < len(b) and b[j] <= value:
            j += 1
        gap = max(gap, abs(i / len(a) - j / len(b)))
    return gap


def crops_of(epoch, *, epochs: int) -> list[tuple[float, float, bool]]:
    out = []
    for e in range(epochs):
        epoch.set_epoch(e)
        out += [crop_of(image) for images, _ in epoch for image in images]
    return out
