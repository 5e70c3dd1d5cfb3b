"""When each gradient is ready during backward, and how a framework groups gradients into messages.

The scaling predictor (analysis/predict/) needs, for one model, the bytes of every gradient and the
point of the backward pass at which it is complete. Both come from the model itself, built on the meta
device (no memory, no real compute, the same on any machine):

- a leaf module's parameters get their gradients once backward has passed that module, and backward
  visits leaf modules in the reverse order of their first forward call (forward hooks record it);
- backward time is spread over the modules in proportion to their backward FLOPs
  (benchmarks/flops.py, forward + backward minus forward alone). Layers without FLOPs
  (BatchNorm, ReLU) take no time in this model: that is the approximation.

`buckets` then groups the gradients in ready order; how each framework groups them (DDP's buckets,
Horovod's fusion, DeepSpeed's reduce bucket) is its config's `gradient_messages`
(benchmarks/frameworks/configs.py). A bucket is ready when its last gradient is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Gradient:
    name: str
    bytes: int  # in fp32, as the parameter is held
    ready_fraction: float  # share of the backward pass done when this gradient is complete (0..1]
    # of a Conv/Linear module: DeepSpeed's torch_autocast may reduce it in the autocast dtype
    lower_precision_safe: bool = False


@dataclass(frozen=True, slots=True)
class Layout:
    gradients: list[Gradient]  # in the order backward completes them
    buffer_bytes: int  # non-trainable state (BatchNorm's running statistics): DDP broadcasts it every forward


@dataclass(frozen=True, slots=True)
class Bucket:
    bytes: int
    ready_fraction: float  # when its last gradient is complete


IMAGE_CLASSIFIERS = ("resnet", "vgg", "mobilenet_v2", "shufflenet_v2", "simple_cnn")
# DeepSpeed's torch_autocast LOWER_PRECISION_SAFE_MODULES: their gradients are reduced in the autocast dtype
LOWER_PRECISION_SAFE = ("Linear", "Conv1d", "Conv2d", "Conv3d")


def _safe(module) -> bool:
    import torch

    return isinstance(module, tuple(getattr(torch.nn, name) for name in LOWER_PRECISION_SAFE))


def layout(model_cfg: Mapping[str, Any], *, image_size: int, batch: int = 2) -> Layout:
    """Every trainable gradient of the configured model, in the order backward completes them, and the
    bytes of its buffers. For a model that takes no image batch (BERT, detection) the FLOPs are not
    traced: gradients complete in the reverse order of the parameters, backward spread over them by bytes."""
    import torch

    from benchmarks.flops import meta_model

    model = meta_model(model_cfg)
    buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())
    if str(model_cfg["arch"]) in IMAGE_CLASSIFIERS:
        with torch.device("meta"):
            return Layout(_traced(model, torch.empty(batch, 3, image_size, image_size)), buffer_bytes)
    return Layout(_by_bytes(model), buffer_bytes)


def _by_bytes(model) -> list[Gradient]:
    safe = {id(p) for module in model.modules() if _safe(module) for p in module.parameters(recurse=False)}
    params = [
        (name, p.numel() * p.element_size(), id(p) in safe) for name, p in model.named_parameters() if p.requires_grad
    ]
    total, done, out = sum(b for _, b, _ in params) or 1, 0, []
    for name, size, is_safe in reversed(params):
        done += size
        out.append(Gradient(name, size, done / total, is_safe))
    return out


def _traced(model, images) -> list[Gradient]:
    from benchmarks.flops import counted

    leaves = {module: name for name, module in model.named_modules() if not list(module.children())}
    order: list[str] = []
    hooks = [
        module.register_forward_hook(lambda m, _i, _o: order.append(leaves[m]) if leaves[m] not in order else None)
        for module in leaves
    ]
    _, forward = counted(lambda: model(images))
    for hook in hooks:
        hook.remove()
    _, total = counted(lambda: model(images).sum().backward())

    def backward_flops(name: str) -> float:
        key = f"{type(model).__name__}.{name}"
        return float(sum(total.get(key, {}).values()) - sum(forward.get(key, {}).values()))

    cost = {name: max(0.0, backward_flops(name)) for name in order}
    all_cost = sum(cost.values()) or 1.0
    done, ready = 0.0, {}
    for name in reversed(order):  # backward: the last module of forward first
        done += cost[name]
        ready[name] = done / all_cost
    gradients = []
    for module, name in leaves.items():
        for pname, param in module.named_parameters(recurse=False):
            if param.requires_grad:
                gradients.append(
                    Gradient(
                        f"{name}.{pname}", param.numel() * param.element_size(), ready.get(name, 1.0), _safe(module)
                    )
                )
    # a stable sort keeps the reverse registration order for modules completed together
    return sorted(reversed(gradients), key=lambda g: g.ready_fraction)


def buckets(gradients: Sequence[Gradient], *, cap_bytes: int, first_cap_bytes: int | None = None) -> list[Bucket]:
    """Group gradients in ready order; a bucket closes once it holds cap_bytes (the first: first_cap_bytes)."""
    out: list[Bucket] = []
    size, ready = 0, 0.0
    for g in gradients:
        size += g.bytes
        ready = max(ready, g.ready_fraction)
        cap = first_cap_bytes if (first_cap_bytes is not None and not out) else cap_bytes
        if size >= cap:
            out.append(Bucket(size, ready))
            size, ready = 0, 0.0
    if size:
        out.append(Bucket(size, ready))
    return out
