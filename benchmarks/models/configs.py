"""The model family's settings: which architecture, its depth, width, ablations, classes and image size.
Torch-free.

Kept apart from the builders (benchmarks/models/__init__.py, which import torch and torchvision when
they build) so that Hydra's ConfigStore, validate() and campaign planning check a model choice
without torch: see benchmarks/adapter_config.py. The dataclass is the one home of the defaults;
conf/model/<option>.yaml sets only what the option changes (arch, depth, ...).

Each family reads the keys it has (depth: resnet, vgg; width: shufflenet_v2; batch_norm: resnet, vgg;
residual: resnet) and ignores the others, as it always ignored model.depth: an experiment may switch
model.arch over the default ResNet. An ablation asked of a family that has the part but no ablation built
(WITHOUT_ABLATIONS) is refused, so that no run is labelled what it was not.
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
    shufflenet_v2 = "shufflenet_v2"
    simple_cnn = "simple_cnn"


# the depths torchvision builds, per family that has a depth
DEPTHS: dict[str, tuple[int, ...]] = {"resnet": (18, 34, 50, 101, 152), "vgg": (11, 13, 16, 19)}
_FAMILY = {"resnet": "ResNet", "vgg": "VGG", "shufflenet_v2": "ShuffleNetV2"}
# the channel multipliers torchvision builds (shufflenet_v2_x0_5 ... x2_0), per family that has a width
WIDTHS: dict[str, tuple[float, ...]] = {"shufflenet_v2": (0.5, 1.0, 1.5, 2.0)}
# families whose BatchNorm and shortcuts are part of the design, with no ablation built
WITHOUT_ABLATIONS = ("mobilenet_v2", "shufflenet_v2")
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


def check_width(arch: str, width: float | None) -> None:
    """ConfigError unless `width` is one the family builds (families without a width ignore it)."""
    allowed = WIDTHS.get(str(arch))
    if allowed is not None and width not in allowed:
        raise ConfigError(
            f"model.width={width} is not a {_FAMILY[str(arch)]} width; choose one of {list(allowed)} "
            f"(e.g. model.width=1.0)"
        )


def check_ablation(arch: str, *, batch_norm: bool | None, residual: bool) -> None:
    """ConfigError when an ablation is asked of a family that builds none (WITHOUT_ABLATIONS)."""
    if str(arch) not in WITHOUT_ABLATIONS:
        return
    for key, value in (("batch_norm", batch_norm), ("residual", residual)):
        if value is False:
            raise ConfigError(
                f"model.{key}=false is not built for model.arch={arch}; drop it, or choose model=resnet"
                f"{' or model=vgg' if key == 'batch_norm' else ''} for the ablation"
            )


@dataclass
class ModelConfig(AdapterConfig):
    """One model: its family (`arch`) and shape."""

    GROUP: ClassVar[str] = "model"
    arch: Arch = MISSING
    depth: int | None = None  # resnet: 18|34|50|101|152; vgg: 11|13|16|19; others: none
    width: float | None = None  # shufflenet_v2: 0.5|1.0|1.5|2.0 (the channel multiplier); others: none
    # resnet, vgg: BatchNorm after each conv (false: none; ResNet's norm layers become Identity); None: the
    # family's own, as torchvision builds it (ResNet with, VGG without); the option YAMLs set it
    batch_norm: bool | None = None
    residual: bool = True  # resnet: false removes the blocks' skip additions (and their 1x1 projections)
    num_classes: int = 1000
    image_size: int = 224
    compile: bool = False  # torch.compile the model

    def check(self) -> None:
        check_depth(self.arch, self.depth)
        check_width(self.arch, self.width)
        check_ablation(self.arch, batch_norm=self.batch_norm, residual=self.residual)
        self.at_least("num_classes", 1)
        self.at_least(
            "image_size",
            MIN_IMAGE_SIZE.get(str(self.arch), 1),
            hint=f" for model.arch={self.arch}" if str(self.arch) in MIN_IMAGE_SIZE else "",
        )
