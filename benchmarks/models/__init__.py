"""Model builders by architecture name: torchvision models plus a small CPU-friendly CNN.

torch and torchvision are imported when a model is built, not when this package is: its config
(benchmarks/models/configs.py) is read by torch-free code (campaign planning, analysis).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from benchmarks.errors import ConfigError
from benchmarks.models.configs import Arch, check_depth

if TYPE_CHECKING:
    from torch import nn


def _torchvision(depth: int | None, num_classes: int, *, arch: str) -> nn.Module:
    import torchvision.models as tvm

    check_depth(arch, depth)
    return getattr(tvm, f"{arch}{depth}")(weights=None, num_classes=num_classes)


def _resnet(depth: int | None, num_classes: int) -> nn.Module:
    return _torchvision(depth, num_classes, arch="resnet")


def _vgg(depth: int | None, num_classes: int) -> nn.Module:
    return _torchvision(depth, num_classes, arch="vgg")


def _mobilenet_v2(depth: int | None, num_classes: int) -> nn.Module:
    import torchvision.models as tvm

    return tvm.mobilenet_v2(weights=None, num_classes=num_classes)


def _simple_cnn(depth: int | None, num_classes: int) -> nn.Module:
    from torch import nn

    # no BatchNorm: a W-rank step equals a 1-rank step at W times the batch, exactly
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, num_classes),
    )


BUILDERS: dict[Arch, Callable[[int | None, int], nn.Module]] = {
    Arch.resnet: _resnet,
    Arch.vgg: _vgg,
    Arch.mobilenet_v2: _mobilenet_v2,
    Arch.simple_cnn: _simple_cnn,
}


def build_model(*, arch: str, depth: int | None, num_classes: int, seed: int) -> nn.Module:
    """A freshly initialised model, identical on every rank for the same seed."""
    import torch

    if arch not in BUILDERS:
        raise ConfigError(f"model.arch={arch!r} is unknown; choose {Arch.listed()}")
    torch.manual_seed(seed)
    return BUILDERS[arch](depth, num_classes)
