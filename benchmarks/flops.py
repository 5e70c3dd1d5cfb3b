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

    fields = {f.name for f in dataclasses.fields(ModelConfig)} - {
        "arch",
        "depth",
        "num_classes",
        "compile",
        "compile_mode",
    }
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
    # the convolutions' fraction of them (cuDNN's kernels; the rest are matmuls and attention): the peak a run
    # without autocast meets depends on it (peaks.run_peak); None where the FLOPs are not counted
    conv_share: float | None = None


def conv_share(by_operator: Mapping[Any, int]) -> float | None:
    """The convolutions' share (forward and backward) of FlopCounterMode's counts by operator."""
    total = sum(by_operator.values())
    conv = sum(count for op, count in by_operator.items() if "convolution" in str(op))
    return conv / total if total else None


def _meta_batches(batch) -> list:
    """The forms of `batch` the meta device may run, in turn. An attention mask changes no matmul's shape, only
    whether transformers asks a value of it (Tensor.item, which a meta tensor cannot answer): transformers 4.x
    asks of a 2-D mask whether it is all ones and of none (it makes one), not of the same mask as one row per
    query (3-D); 5.x asks of every mask, not of none. Each form costs the same matmuls: the count is the same."""
    if not (isinstance(batch, dict) and "attention_mask" in batch):
        return [batch]
    mask = batch["attention_mask"]
    return [
        {**batch, "attention_mask": None},
        {**batch, "attention_mask": mask[:, None, :].expand(-1, mask.shape[1], -1)},
    ]


def model_flops_per_sample(model_cfg: Mapping[str, Any], task, *, batch: int = COUNT_BATCH) -> SampleFlops:
    """Forward + backward FLOPs of one training sample of the configured model and its task (benchmarks/tasks):
    the task's loss on a synthetic batch, on the meta device, over the batch's samples. BERT, where the meta
    device cannot run the installed transformers, gets its analytic count (bert_flops_per_sample: the same
    figure wherever both run, tests/unit/test_mfu_energy.py)."""
    import torch

    model = meta_model(model_cfg)
    model.train()
    ctx = _MetaContext(device=torch.device("meta"), image_size=int(model_cfg.get("image_size") or 224))
    whole = task.synthetic_batch(range(batch), ctx)
    failed = None
    for batch_of in _meta_batches(whole):
        try:
            total, by_module = counted(lambda: task.loss(model, batch_of).backward())
        except (RuntimeError, NotImplementedError, TypeError, ValueError) as error:
            # a model whose forward reads tensor values (detection's anchor matching) cannot run on the meta device
            failed = failed or error
            model.zero_grad(set_to_none=True)
            continue
        return SampleFlops(
            total / task.num_samples(whole),
            "torch.utils.flop_counter, forward + backward, meta device",
            conv_share(by_module.get("Global", {})),
        )
    first = str(failed).strip().splitlines()[0] if str(failed).strip() else ""
    why = f"FLOPs not countable on the meta device: {type(failed).__name__}: {first[:120]}"
    if str(model_cfg["arch"]) == "bert":
        flops = bert_flops_per_sample(str(model_cfg["size"]), seq_len=int(model_cfg["seq_len"]))
        return SampleFlops(flops, f"analytic (benchmarks/flops.py bert_flops_per_sample); {why}", 0.0)
    return SampleFlops(None, why)


def bert_flops_per_sample(size: str, *, seq_len: int) -> float:
    """Forward + backward FLOPs of one BERT question-answering sequence (benchmarks/models/bert.py SIZES), as
    FlopCounterMode counts them: per layer and token, the Q, K, V and output projections (4 x 2h^2), the
    feed-forward (2 x 2hf) and attention's two matmuls (QK^T and the weighted sum of V: 2 x 2sh); the span
    head (2 x 2h); embeddings, normalisation, softmax, GELU nothing; backward twice forward (inputs' and
    weights' gradients); padding counts (the matmuls run over it)."""
    from benchmarks.models.bert import SIZES

    layers, hidden, _, feed_forward = SIZES[size]
    attention = 2 * 2 * seq_len * hidden
    per_token = layers * (4 * 2 * hidden * hidden + 2 * 2 * hidden * feed_forward + attention) + 2 * 2 * hidden
    return 3.0 * per_token * seq_len
