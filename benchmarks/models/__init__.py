"""Model builders by architecture name: torchvision models plus a small CPU-friendly CNN."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from benchmarks.errors import ConfigError

RESNET_DEPTHS = (18, 34, 50, 101, 152)
VGG_DEPTHS = (11, 13, 16, 19)


def _resnet(depth: int | None, num_classes: int) -> nn.Module:
    import torchvision.models as tvm

    if depth not in RESNET_DEPTHS:
        raise ConfigError(f"model.depth={depth} is not a ResNet depth; choose one of {list(RESNET_DEPTHS)}")
    return getattr(tvm, f"resnet{depth}")(weights=None, num_classes=num_classes)


def _vgg(depth: int | None, num_classes: int) -> nn.Module:
    import torchvision.models as tvm

    if depth not in VGG_DEPTHS:
        raise ConfigError(f"model.depth={depth} is not a VGG depth; choose one of {list(VGG_DEPTHS)}")
    return getattr(tvm, f"vgg{depth}")(weights=None, num_classes=num_classes)


def _mobilenet_v2(depth: int | None, num_classes: int) -> nn.Module:
    import torchvision.models as tvm

    return tvm.mobilenet_v2(weights=None, num_classes=num_classes)


def _simple_cnn(depth: int | None, num_classes: int) -> nn.Module:
    # no BatchNorm: a W-rank step equals a 1-rank step at W times the batch, exactly
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, num_classes),
    )


BUILDERS: dict[str, Callable[[int | None, int], nn.Module]] = {
    "resnet": _resnet,
    "vgg": _vgg,
    "mobilenet_v2": _mobilenet_v2,
    "simple_cnn": _simple_cnn,
}


def build_model(*, arch: str, depth: int | None, num_classes: int, seed: int) -> nn.Module:
    """A freshly initialised model, identical on every rank for the same seed."""
    if arch not in BUILDERS:
        raise ConfigError(f"model.arch={arch!r} is unknown; choose one of {sorted(BUILDERS)}")
    torch.manual_seed(seed)
    return BUILDERS[arch](depth, num_classes)
