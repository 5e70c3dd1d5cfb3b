"""Model builders by architecture name: torchvision's classifiers and RetinaNet, Hugging Face's BERT
(benchmarks/models/bert.py) and a small CPU-friendly CNN.

torch, torchvision and transformers are imported when a model is built, not when this package is: its
config (benchmarks/models/configs.py) is read by torch-free code (campaign planning, analysis).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchmarks.errors import ConfigError
from benchmarks.models.configs import AUTO, Arch, ModelConfig

if TYPE_CHECKING:
    from torch import nn


def _resnet(m: ModelConfig) -> nn.Module:
    from benchmarks.models import resnet

    # None is the family's own: ResNet with BatchNorm
    return resnet.build(m.depth, m.num_classes, batch_norm=m.batch_norm is not False, residual=m.residual)


def _vgg(m: ModelConfig) -> nn.Module:
    import torchvision.models as tvm

    # None is the family's own: torchvision's vgg<depth>, without BatchNorm
    return getattr(tvm, f"vgg{m.depth}{'_bn' if m.batch_norm else ''}")(weights=None, num_classes=m.num_classes)


def _mobilenet_v2(m: ModelConfig) -> nn.Module:
    import torchvision.models as tvm

    return tvm.mobilenet_v2(weights=None, num_classes=m.num_classes)


def _shufflenet_v2(m: ModelConfig) -> nn.Module:
    import torchvision.models as tvm

    name = f"shufflenet_v2_x{str(float(m.width)).replace('.', '_')}"  # 0.5 -> shufflenet_v2_x0_5
    return getattr(tvm, name)(weights=None, num_classes=m.num_classes)


def _simple_cnn(m: ModelConfig) -> nn.Module:
    from torch import nn

    # no BatchNorm: a W-rank step equals a 1-rank step at W times the batch, exactly
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, m.num_classes),
    )


def _bert(m: ModelConfig) -> nn.Module:
    from benchmarks.models import bert

    return bert.build(str(m.size))


def _retinanet(m: ModelConfig) -> nn.Module:
    from benchmarks.models import retinanet

    # no weights at all (none downloaded); its losses in float32 under mixed precision (retinanet.py)
    return retinanet.build(num_classes=m.num_classes, image_size=m.image_size)


BUILDERS: dict[Arch, Callable[[ModelConfig], nn.Module]] = {
    Arch.resnet: _resnet,
    Arch.vgg: _vgg,
    Arch.mobilenet_v2: _mobilenet_v2,
    Arch.shufflenet_v2: _shufflenet_v2,
    Arch.simple_cnn: _simple_cnn,
    Arch.bert: _bert,
    Arch.retinanet: _retinanet,
}


def build_model(*, arch: str, depth: int | None, num_classes: int, seed: int, **options: Any) -> nn.Module:
    """A freshly initialised model, identical on every rank for the same seed. `options` are ModelConfig's
    other shape fields (width, batch_norm, residual, size, image_size), with its defaults; checked by
    ModelConfig.check(). num_classes is a number: a run's `auto` is resolved before (validate.py)."""
    import torch

    config = ModelConfig(arch=arch, depth=depth, num_classes=num_classes, **options)
    config.check()
    if config.num_classes == AUTO:
        raise ConfigError(
            "num_classes=auto is the data set's class count, which validate() writes into a run's config "
            "(resolve_num_classes) before its model is built; build_model takes the number, e.g. num_classes=1000"
        )
    torch.manual_seed(seed)
    return BUILDERS[config.arch](config)
