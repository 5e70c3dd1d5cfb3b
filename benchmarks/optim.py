"""The optimizers (`optim.name`: sgd, lars, adamw) and the learning rate each step (`optim.schedule`).

The schedule is applied by setting every parameter group's lr before a step (LrSchedule), not through a
torch scheduler object: the frameworks hand back their own optimizer objects (Horovod's
DistributedOptimizer, DeepSpeed's engine optimizer, ZeroRedundancyOptimizer), and all of them read
param_groups' lr. The values are optim_configs.lr_factor's closed form, which the tests hold to torch's
schedulers step by step.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable

import torch

from benchmarks.optim_configs import in_steps, lr_factor, scaled_lr


class LARS(torch.optim.Optimizer):
    """SGD with momentum and layer-wise adaptive rate scaling (You et al., 2017): each weight tensor's step
    is scaled by trust_coefficient x ||w|| / (||g|| + weight_decay x ||w||). Biases and normalisation
    parameters (tensors of one dimension) take the plain SGD step, without weight decay, as is usual."""

    def __init__(
        self,
        params: Iterable,
        *,
        lr: float,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        trust_coefficient: float = 0.001,
    ) -> None:
        super().__init__(
            params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, trust_coefficient=trust_coefficient)
        )

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if p.ndim > 1:
                    decay = group["weight_decay"]
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(grad)
                    trust = torch.where(
                        (w_norm > 0) & (g_norm > 0),
                        group["trust_coefficient"] * w_norm / (g_norm + decay * w_norm),
                        torch.ones_like(w_norm),
                    )
                    grad = (grad + decay * p) * trust
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = grad.clone()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(grad)
                p.add_(state["momentum_buffer"], alpha=-group["lr"])
        return loss


def build_optimizer(params: Iterable, optim, *, global_batch: int) -> torch.optim.Optimizer:
    """The optimizer `optim` (a composed optim node) names, at the (scaled) learning rate."""
    lr = scaled_lr(optim, global_batch=global_batch)
    name = str(optim.name)
    if name == "sgd":
        return torch.optim.SGD(
            params,
            lr=lr,
            momentum=optim.momentum,
            weight_decay=optim.weight_decay,
            nesterov=bool(optim.nesterov),
            fused=bool(optim.fused) or None,
        )
    if name == "lars":
        return LARS(
            params,
            lr=lr,
            momentum=optim.momentum,
            weight_decay=optim.weight_decay,
            trust_coefficient=optim.trust_coefficient,
        )
    if name == "adamw":
        return torch.optim.AdamW(
            params,
            lr=lr,
            betas=tuple(optim.betas),
            eps=optim.eps,
            weight_decay=optim.weight_decay,
            fused=bool(optim.fused) or None,
        )
    raise ValueError(f"unknown optimizer {name!r}")


def constructor_settings(optimizer: torch.optim.Optimizer) -> dict:
    """The optimizer's settings (its `defaults`) that its class's constructor takes: what rebuilding the same
    optimizer over other parameters passes (FSDP's sharded ones, ZeroRedundancyOptimizer). torch's AdamW
    keeps Adam's `decoupled_weight_decay` in its defaults but does not take it."""
    accepted = inspect.signature(type(optimizer).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return dict(optimizer.defaults)
    return {key: value for key, value in optimizer.defaults.items() if key in accepted}


class LrSchedule:
    """Sets the learning rate of optimizer step k on an optimizer's parameter groups; returns it (the rank
    log's lr)."""

    def __init__(self, optim, *, global_batch: int, total_steps: int, steps_per_epoch: int = 1) -> None:
        self.schedule = in_steps(optim.schedule, steps_per_epoch=steps_per_epoch)
        self.total_steps = int(total_steps)
        self.base_lr = scaled_lr(optim, global_batch=global_batch)
        self.constant = str(self.schedule.name) == "constant" and self.schedule.warmup_steps == 0

    def lr(self, step: int) -> float:
        return self.base_lr * lr_factor(self.schedule, step, total_steps=self.total_steps)

    def apply(self, optimizer, step: int) -> float:
        lr = self.lr(step)
        if not self.constant:  # nothing to change otherwise: the optimizer was built at this lr
            for group in optimizer.param_groups:
                group["lr"] = lr
        return lr
