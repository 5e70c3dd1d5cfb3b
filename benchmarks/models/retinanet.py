"""RetinaNet (ResNet-50 FPN): torchvision's retinanet_resnet50_fpn without weights, its extra pyramid levels
(P6, P7) computed in float32 on a CPU under bfloat16 autocast.

Why (docs/models.md, "RetinaNet under mixed precision"): torch's CPU bfloat16 convolution (oneDNN's AVX-512
and AMX kernels; its AVX2 kernel is right) returns a wrong weight gradient, 1e29-1e38 from the second call on,
for a 3x3 convolution of stride 2 over a 1x1 map. P7 is such a convolution wherever P6 is 1x1 (images up to
64 px; P6 too up to 32 px), so a small RetinaNet under amp_bf16 went NaN within a few steps on those CPUs
while float32 trained. P6 and P7 are the pyramid's two smallest maps: float32 there costs little, and only
CPU runs take it; a GPU runs them in bfloat16 as autocast says.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.detection import retinanet_resnet50_fpn
from torchvision.ops.feature_pyramid_network import LastLevelP6P7


def _bf16_on_cpu(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a convolution of x by weight would run in bfloat16 on a CPU: under autocast, or with bfloat16
    tensors (FSDP2's mixed-precision policy casts the parameters and inputs themselves)."""
    if x.device.type != "cpu":
        return False
    autocast = torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    return autocast or torch.bfloat16 in (x.dtype, weight.dtype)


def _conv_fp32(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """conv(x) in float32, whatever the dtype of its input and parameters (the gradient flows back to them)."""
    bias = None if conv.bias is None else conv.bias.float()
    return F.conv2d(x.float(), conv.weight.float(), bias, conv.stride, conv.padding, conv.dilation, conv.groups)


class P6P7Fp32OnCpu(LastLevelP6P7):
    """torchvision's LastLevelP6P7, computed in float32 where it would run in bfloat16 on a CPU; its outputs
    keep the dtype of its input, as the plain block's do."""

    def forward(self, p: list[torch.Tensor], c: list[torch.Tensor], names: list[str]):
        x = p[-1] if self.use_P5 else c[-1]
        if not _bf16_on_cpu(x, self.p6.weight):
            return super().forward(p, c, names)
        with torch.autocast("cpu", enabled=False):
            p6 = _conv_fp32(self.p6, x)
            p7 = _conv_fp32(self.p7, F.relu(p6))
        p.extend([p6.to(x.dtype), p7.to(x.dtype)])
        names.extend(["p6", "p7"])
        return p, names


def build(*, num_classes: int, image_size: int) -> nn.Module:
    """retinanet_resnet50_fpn(weights=None, weights_backbone=None), its weights for one seed torchvision's
    (tests/unit/test_models.py): every backbone layer trains, BatchNorm too; images stay at image_size
    (torchvision resizes to 800-1333 px unless told)."""
    model = retinanet_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=num_classes, min_size=image_size, max_size=image_size
    )
    plain = model.backbone.fpn.extra_blocks
    with torch.random.fork_rng(devices=[]):  # its own initialisation is overwritten: it draws nothing from the run's
        extra = P6P7Fp32OnCpu(plain.p6.in_channels, plain.p6.out_channels)
    extra.load_state_dict(plain.state_dict())
    model.backbone.fpn.extra_blocks = extra
    return model
