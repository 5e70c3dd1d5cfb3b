"""Object detection, as torchvision's detection models train: a batch of images and one target per image
(its boxes in pixels, x1 y1 x2 y2, and their class labels); the model in training mode returns its
losses by name (RetinaNet: classification, bbox_regression), and the training loss is their sum.

Synthetic images are classification's normalised-looking noise at model.image_size; each carries
BOXES_PER_IMAGE boxes (COCO's train2017 has about 7 per image) of random place, a side of 1/16 to 1/2 of
the image, and random labels below model.num_classes.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from benchmarks.models.configs import SAMPLE_UNITS, ModelConfig, TaskKind
from benchmarks.tasks.base import SampleContext, generator

BOXES_PER_IMAGE = 7

Target = dict[str, torch.Tensor]


def synthetic_sample(
    sample_id: int, *, seed: int, image_size: int, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One image, its boxes (BOXES_PER_IMAGE x 4, inside the image, never empty) and labels, a pure
    function of (seed, sample_id)."""
    g = generator(seed, sample_id)
    image = torch.randn(3, image_size, image_size, generator=g)
    side = image_size * (1 / 16 + (1 / 2 - 1 / 16) * torch.rand(BOXES_PER_IMAGE, 2, generator=g))
    corner = (image_size - side) * torch.rand(BOXES_PER_IMAGE, 2, generator=g)
    boxes = torch.cat([corner, corner + side], dim=1)
    labels = torch.randint(num_classes, (BOXES_PER_IMAGE,), generator=g)
    return image, boxes, labels


class Detection:
    kind: ClassVar[TaskKind] = TaskKind.detection
    sample_unit: ClassVar[str] = SAMPLE_UNITS[TaskKind.detection]

    def __init__(self, model: ModelConfig, *, label_smoothing: float = 0.0) -> None:
        assert label_smoothing == 0.0, "validate() refuses optim.label_smoothing for this task"
        self.image_size = int(model.image_size)

    def synthetic_batch(self, sample_ids: range, ctx: SampleContext) -> tuple[torch.Tensor, list[Target]]:
        samples = [
            synthetic_sample(i, seed=ctx.seed, image_size=ctx.image_size, num_classes=ctx.num_classes)
            for i in sample_ids
        ]
        images = torch.stack([image for image, _, _ in samples]).to(ctx.device)
        if ctx.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        targets = [{"boxes": boxes.to(ctx.device), "labels": labels.to(ctx.device)} for _, boxes, labels in samples]
        return images, targets

    def loss(self, model: torch.nn.Module, batch: tuple[torch.Tensor, list[Target]]) -> torch.Tensor:
        images, targets = batch
        return sum(model(images, targets).values())

    def num_samples(self, batch: tuple[torch.Tensor, list[Target]]) -> int:
        return int(batch[0].shape[0])

    def describe(self) -> dict:
        return {
            "task": self.kind.value,
            "sample_unit": self.sample_unit,
            "image_size": self.image_size,
            "boxes_per_image": BOXES_PER_IMAGE,
        }
