"""Tiny datasets shared by the DALI tests: an ImageFolder where the label IS the sample's identity
(one image per class), the same images as TFRecord shards, and a small ordinary dataset."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

if importlib.util.find_spec("nvidia") is None or importlib.util.find_spec("nvidia.dali") is None:
    pytest.skip("nvidia-dali is not installed: run 'make dali'", allow_module_level=True)


@pytest.fixture(autouse=True)
def _needs_dali(dali) -> None:
    """Every test here runs DALI: the root conftest's `dali` fixture marks it."""


NUM_IDS = 11  # does not divide evenly by 2 or 3 ranks, nor by the batch sizes used


@pytest.fixture(scope="session")
def id_folder(tmp_path_factory) -> Path:
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("dali") / "ids"
    synth_imagefolder(
        out, num_classes=NUM_IDS, images_per_class=1, width=40, height=32, quality=90, seed=3, progress=False
    )
    return out


@pytest.fixture(scope="session")
def id_tfrecords(id_folder) -> Path:
    from benchmarks.data.tfrecord import convert_imagefolder

    out = id_folder.parent / "ids_tfrecord"
    convert_imagefolder(id_folder, out, num_shards=3, seed=0, progress=False)
    return out


@pytest.fixture(scope="session")
def small_folder(tmp_path_factory) -> Path:
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("dali") / "small"
    synth_imagefolder(out, num_classes=4, images_per_class=6, width=64, height=48, quality=90, seed=1, progress=False)
    return out


def loader_context(*, num_classes: int = NUM_IDS, **settings):
    """tests.conftest.cpu_loader_context with the id folder's classes."""
    from tests.conftest import cpu_loader_context

    return cpu_loader_context(num_classes=num_classes, **settings)
