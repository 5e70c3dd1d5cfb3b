"""Image classification: (images, labels) batches, cross-entropy on the logits; what every loader yields."""

from __future__ import annotations

from typing import ClassVar

import torch

from benchmarks.models.configs import SAMPLE_UNITS, ModelConfig, TaskKind
from benchmarks.tasks.base import SampleContext, generator


def synthetic_sample(sample_id: int, *, seed: int, image_size: int, num_classes: int) -> tuple[torch.Tensor, int]:
    """One normalised-looking image and label, a pure function of (seed, sample_id)."""
    g = generator(seed, sample_id)
    image = torch.randn(3, image_size, image_size, generator=g)
    label = int(torch.randint(num_classes, (1,), generator=g))
    return image, label


def synthetic_batch(sample_ids: range, ctx: SampleContext) -> tuple[torch.Tensor, torch.Tensor]:
    """(images, labels) of these samples on ctx.device, channels_last where the precision asks for it."""
    samples = [
        synthetic_sample(i, seed=ctx.seed, image_size=ctx.image_size, num_classes=ctx.num_classes) for i in sample_ids
    ]
    images = torch.stack([image for image, _ in samples]).to(ctx.device)
    if ctx.channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.tensor([label for _, label in samples], device=ctx.device)
    return images, labels


class ImageClassification:
    kind: ClassVar[TaskKind] = TaskKind.classification
    sample_unit: ClassVar[str] = SAMPLE_UNITS[TaskKind.classification]

    def __init__(self, model: ModelConfig | None = None, *, label_smoothing: float = 0.0) -> None:
        self.label_smoothing = label_smoothing
        self.criterion = torch.nn.CrossEntropyLoss(label_smoothing=label_smoothing)

    def synthetic_batch(self, sample_ids: range, ctx: SampleContext) -> tuple[torch.Tensor, torch.Tensor]:
        return synthetic_batch(sample_ids, ctx)

    def loss(self, model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return self.criterion(model(images), labels)

    def num_samples(self, batch: tuple[torch.Tensor, torch.Tensor]) -> int:
        return int(batch[1].shape[0])

    def describe(self) -> dict:
        return {"task": self.kind.value, "sample_unit": self.sample_unit, "label_smoothing": self.label_smoothing}
