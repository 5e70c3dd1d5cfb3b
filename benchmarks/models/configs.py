"""The model family's settings: which architecture, its depth, classes and image size. Torch-free.

Kept apart from the builders (benchmarks/models/__init__.py, which import torch and torchvision when
they build) so that Hydra's ConfigStore, validate() and campaign planning check a model choice
without torch: see benchmarks/adapter_config.py. The dataclass is the one home of the defaults;
conf/model/<option>.yaml sets only what the option changes (arch, depth, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from omegaconf import MISSING

from benchmarks.adapter_config import AdapterConfig, Choice
from benchmarks.errors import ConfigError


class Arch(Choice):
    """The model families benchmarks/models builds."""

    resnet = "resnet"
    vgg = "vgg"
    mobilenet_v2 = "mobilenet_v2"
    simple_cnn = "simple_cnn"


# the depths torchvision builds, per family that has a depth
DEPTHS: dict[str, tuple[int, ...]] = {"resnet": (18, 34, 50, 101, 152), "vgg": (11, 13, 16, 19)}
_FAMILY = {"resnet": "ResNet", "vgg": "VGG"}
# the smallest image a family's layers take: VGG's five max-pools halve it to 1 pixel at 32
MIN_IMAGE_SIZE: dict[str, int] = {"vgg": 32}


def check_depth(arch: str, depth: int | None) -> None:
    """ConfigError unless `depth` is one the family builds (families without a depth ignore it: an
    experiment that picks model.arch=simple_cnn over the default ResNet keeps its depth)."""
    allowed = DEPTHS.get(str(arch))
    if allowed is not None and depth not in allowed:
        raise ConfigError(
            f"model.depth={depth} is not a {_FAMILY[str(arch)]} depth; choose one of {list(allowed)} "
            f"(e.g. model.depth={allowed[0]})"
        )


@dataclass
class ModelConfig(AdapterConfig):
    """One model: its family (`arch`) and shape."""

    GROUP: ClassVar[str] = "model"
    arch: Arch = MISSING
    depth: int | None = None  # resnet: 18|34|50|101|152; vgg: 11|13|16|19; others: none
    num_classes: int = 1000
    image_size: int = 224
    compile: bool = False  # torch.compile the model

    def check(self) -> None:
        check_depth(self.arch, self.depth)
        self.at_least("num_classes", 1)
        self.at_least(
            "image_size",
            MIN_IMAGE_SIZE.get(str(self.arch), 1),
            hint=f" for model.arch={self.arch}" if str(self.arch) in MIN_IMAGE_SIZE else "",
        )
