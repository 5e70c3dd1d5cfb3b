"""Model FLOPs, counted by torch.utils.flop_counter on the meta device: no memory, no real compute, the
same on any machine. The one home of FlopCounterMode in the project: the scaling predictor's gradient
layout (gradients.py: backward FLOPs per module) and MFU's numerator (model_flops_per_sample) use it.

A training sample's FLOPs are forward + backward of the task's loss on a synthetic batch of the run's
shapes (classification's images, question answering's sequences, detection's images and boxes), divided
by the batch: the model FLOPs of MFU (PaLM's definition: what the model needs, not what the hardware did;
no recomputation, no optimizer step, which is O(parameters)). FlopCounterMode counts matmuls,
convolutions and attention (2 FLOPs per multiply-add); normalisation and activations count nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

COUNT_BATCH = 2  # samples in the counted batch (two: BatchNorm in training mode wants more than one value)


def counted(fn: Callable[[], Any]) -> tuple[int, dict[str, dict]]:
    """(total FLOPs, FLOPs by module name and operator) of what fn() runs (its backward too, if it calls it)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False, depth=None) as counter:
        fn()
    return int(counter.get_total_flops()), counter.get_flop_counts()


def meta_model(model_cfg: Mapping[str, Any]):
    """The configured model on torch's meta device: its shapes, no memory."""
    import dataclasses

    import torch

    from benchmarks.models import build_model
    from benchmarks.models.configs import AUTO, NUM_CLASSES_WITHOUT_DATA, ModelConfig

    fields = {f.name for f in dataclasses.fields(ModelConfig)} - {"arch", "depth", "num_classes", "compile"}
    options = {k: v for k, v in model_cfg.items() if k in fields and v is not None}
    # a run's config.yaml has its number; a model section composed for a prediction may say auto, which
    # has no data set here to count: the model without one
    classes = model_cfg.get("num_classes")
    with torch.device("meta"):
        return build_model(
            arch=str(model_cfg["arch"]),
            depth=model_cfg.get("depth"),
            num_classes=NUM_CLASSES_WITHOUT_DATA if classes in (None, AUTO) else int(classes),
            seed=0,
            **options,
        )


@dataclass(frozen=True, slots=True)
class _MetaContext:  # tasks.base.SampleContext on the meta device
    device: Any
    seed: int = 0
    num_classes: int = 2
    image_size: int = 224
    channels_last: bool = False


@dataclass(frozen=True, slots=True)
class SampleFlops:
    flops: float | None  # forward + backward FLOPs of one training sample; None: `reason` says why
    reason: str


def model_flops_per_sample(model_cfg: Mapping[str, Any], task, *, batch: int = COUNT_BATCH) -> SampleFlops:
    """Forward + backward FLOPs of one training sample of the configured model and its task (benchmarks/tasks):
    the task's loss on a synthetic batch, on the meta device, over the batch's samples."""
    import torch

    model = meta_model(model_cfg)
    model.train()
    ctx = _MetaContext(device=torch.device("meta"), image_size=int(model_cfg.get("image_size") or 224))
    batch_of = task.synthetic_batch(range(batch), ctx)
    if isinstance(batch_of, dict) and "attention_mask" in batch_of:
        # transformers asks whether a 2-D mask is all ones (Tensor.item, which a meta tensor cannot answer);
        # the same mask as one row per query (3-D) skips the question and costs the same matmuls
        mask = batch_of["attention_mask"]
        batch_of = {**batch_of, "attention_mask": mask[:, None, :].expand(-1, mask.shape[1], -1)}
    try:
        total, _ = counted(lambda: task.loss(model, batch_of).backward())
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as error:
        # a model whose forward reads tensor values (detection's anchor matching) cannot run on the meta device
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return SampleFlops(None, f"FLOPs not countable on the meta device: {type(error).__name__}: {first[:120]}")
    return SampleFlops(total / task.num_samples(batch_of), "torch.utils.flop_counter, forward + backward, meta device")
