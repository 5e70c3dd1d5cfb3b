"""torchvision's ResNet and the Stash study's two ablations: without BatchNorm, without skip connections.

- `batch_norm=False`: every norm layer is nn.Identity (the convs keep bias=False). The last conv of each
  residual branch starts at zero (the idea of Fixup / SkipInit: every block starts as the identity, so
  the activations do not grow with depth without a norm to rescale them); the other convs keep
  torchvision's Kaiming init.
- `residual=False`: the blocks' skip additions are removed, and with them the 1x1 projections that only fed
  them: a plain net of stacked convs (He et al. 2016's "plain" baseline). Without BatchNorm too, nothing is
  zeroed (no identity to start from: a zero conv would cut the signal).
"""

from __future__ import annotations

from torch import Tensor, nn
from torchvision.models import resnet as tv

# per depth: the block and the blocks per stage, as torchvision.models.resnet<depth> builds them
LAYOUT: dict[int, tuple[type[tv.BasicBlock | tv.Bottleneck], list[int]]] = {
    18: (tv.BasicBlock, [2, 2, 2, 2]),
    34: (tv.BasicBlock, [3, 4, 6, 3]),
    50: (tv.Bottleneck, [3, 4, 6, 3]),
    101: (tv.Bottleneck, [3, 4, 23, 3]),
    152: (tv.Bottleneck, [3, 8, 36, 3]),
}


class PlainBasicBlock(tv.BasicBlock):
    """BasicBlock without its skip addition (and without the projection torchvision hands it for one)."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None, *args, **kw):
        super().__init__(inplanes, planes, stride, None, *args, **kw)

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))))


class PlainBottleneck(tv.Bottleneck):
    """Bottleneck without its skip addition (and without the projection torchvision hands it for one)."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None, *args, **kw):
        super().__init__(inplanes, planes, stride, None, *args, **kw)

    def forward(self, x: Tensor) -> Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)))


def build(depth: int, num_classes: int, *, batch_norm: bool, residual: bool) -> nn.Module:
    """ResNet-<depth>; with batch_norm and residual exactly torchvision's resnet<depth>."""
    block, layers = LAYOUT[depth]
    if not residual:
        block = PlainBottleneck if block is tv.Bottleneck else PlainBasicBlock
    model = tv.ResNet(block, layers, num_classes=num_classes, norm_layer=nn.BatchNorm2d if batch_norm else nn.Identity)
    if residual and not batch_norm:
        for m in model.modules():
            if isinstance(m, tv.Bottleneck | tv.BasicBlock):
                nn.init.zeros_((m.conv3 if isinstance(m, tv.Bottleneck) else m.conv2).weight)
    return model
