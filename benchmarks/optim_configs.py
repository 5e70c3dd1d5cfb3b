"""The optimizer and learning-rate schedule settings (`optim.*`, `optim.schedule.*`) and the schedule's
closed form. Torch-free: validate() checks them before launch and the tests hold lr_factor() to torch's
own schedulers step by step (benchmarks/optim.py builds the optimizers).

The schedule counts optimizer steps from the first step of the run (warm-up steps included): a linear
warm-up over `warmup_steps` from `warmup_start_factor` x lr to lr (torch's LinearLR), then the schedule
over the remaining steps (torch's SequentialLR of LinearLR and the schedule: the schedule's own count
starts at 0 when the warm-up ends). `optim.scale_lr` applies the linear scaling rule first:
lr x global_batch / base_batch. With optim.schedule.unit=epochs the counts are epochs (in_steps()).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from benchmarks.adapter_config import Choice
from benchmarks.errors import ConfigError


class OptimizerName(Choice):
    """sgd (momentum, Nesterov), lars (SGD with layer-wise trust ratios, for very large batches), adamw."""

    sgd = "sgd"
    lars = "lars"
    adamw = "adamw"


class ScheduleName(Choice):
    """How the learning rate falls after the warm-up."""

    constant = "constant"
    step = "step"  # x gamma every step_size steps
    multistep = "multistep"  # x gamma at each of milestones
    cosine = "cosine"  # to min_lr_factor x lr at the end of the run (one step past its last)
    exponential = "exponential"  # x gamma every step
    polynomial = "polynomial"  # (1 - k/K)^power, to 0 at the end of the run (one step past its last)


class ScheduleUnit(Choice):
    """What warmup_steps, step_size and milestones count, and how often exponential decays."""

    steps = "steps"  # optimizer steps
    epochs = "epochs"  # epochs of the training set (the same epochs at every global batch: a campaign's unit)


@dataclass
class ScheduleConfig:
    name: ScheduleName = ScheduleName.constant
    unit: ScheduleUnit = ScheduleUnit.steps
    warmup_steps: int = 0  # linear warm-up steps (0: none)
    warmup_start_factor: float = 0.001  # the warm-up starts at this x lr
    step_size: int = 1000  # step: steps between decays
    milestones: list[int] = field(default_factory=list)  # multistep: steps after the warm-up where lr x gamma
    gamma: float = 0.1  # step, multistep, exponential: the factor per decay
    power: float = 1.0  # polynomial
    min_lr_factor: float = 0.0  # cosine: the last step's lr, as a share of lr


@dataclass
class OptimConfig:
    name: OptimizerName = OptimizerName.sgd
    lr: float = 0.1
    momentum: float = 0.9  # sgd, lars
    nesterov: bool = False  # sgd
    weight_decay: float = 1e-4
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])  # adamw
    eps: float = 1e-8  # adamw
    trust_coefficient: float = 0.001  # lars: eta of the layer-wise trust ratio
    label_smoothing: float = 0.0  # of the cross-entropy loss
    scale_lr: bool = False  # the linear scaling rule: lr x global_batch / base_batch
    base_batch: int = 256
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    # sgd, adamw: torch's fused kernel (one launch for every parameter's update, instead of a few per tensor
    # group with foreach); lars has none
    fused: bool = False


def _between(
    key: str, value: float, low: float, high: float, *, low_open: bool = False, high_open: bool = True, hint: str = ""
) -> None:
    ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if isinstance(value, bool) or not ok:
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ConfigError(f"{key}={value} must be in {interval}{hint}")


def check(optim) -> None:
    """One-line errors for an impossible optim / optim.schedule config (a composed node or an OptimConfig)."""
    _between("optim.lr", optim.lr, 0, math.inf, low_open=True, hint=" (e.g. optim.lr=0.1)")
    _between("optim.momentum", optim.momentum, 0, 1)
    _between("optim.weight_decay", optim.weight_decay, 0, math.inf)
    _between("optim.label_smoothing", optim.label_smoothing, 0, 1)
    _between("optim.trust_coefficient", optim.trust_coefficient, 0, math.inf, low_open=True)
    _between("optim.eps", optim.eps, 0, math.inf, low_open=True)
    if optim.base_batch < 1:
        raise ConfigError(f"optim.base_batch={optim.base_batch} must be >= 1 (the batch optim.lr is given for)")
    if len(optim.betas) != 2:
        raise ConfigError(f"optim.betas={list(optim.betas)} must be two numbers, e.g. optim.betas=[0.9,0.999]")
    for beta in optim.betas:
        _between("optim.betas", beta, 0, 1)
    if optim.nesterov and (str(optim.name) != "sgd" or optim.momentum <= 0):
        raise ConfigError(
            f"optim.nesterov=true needs optim.name=sgd and optim.momentum > 0 (got optim.name={optim.name}, "
            f"optim.momentum={optim.momentum})"
        )
    if optim.fused and str(optim.name) == "lars":
        raise ConfigError(
            "optim.fused=true has no kernel for optim.name=lars; drop optim.fused, or choose sgd or adamw"
        )
    s = optim.schedule
    if s.warmup_steps < 0:
        raise ConfigError(f"optim.schedule.warmup_steps={s.warmup_steps} must be >= 0")
    _between("optim.schedule.warmup_start_factor", s.warmup_start_factor, 0, 1, low_open=True, high_open=False)
    if s.step_size < 1:
        raise ConfigError(f"optim.schedule.step_size={s.step_size} must be >= 1 (optimizer steps between decays)")
    _between("optim.schedule.gamma", s.gamma, 0, 1, low_open=True, high_open=False)
    _between("optim.schedule.power", s.power, 0, math.inf, low_open=True)
    _between("optim.schedule.min_lr_factor", s.min_lr_factor, 0, 1)
    milestones = list(s.milestones)
    if any(not isinstance(m, int) or m < 1 for m in milestones) or milestones != sorted(set(milestones)):
        raise ConfigError(
            f"optim.schedule.milestones={milestones} must be increasing step counts >= 1, "
            "e.g. optim.schedule.milestones=[3000,6000]"
        )
    if str(s.name) == "multistep" and not milestones:
        raise ConfigError("optim.schedule.name=multistep needs milestones, e.g. optim.schedule.milestones=[3000,6000]")


def scaled_lr(optim, *, global_batch: int) -> float:
    """optim.lr, times global_batch / base_batch under the linear scaling rule (optim.scale_lr)."""
    return optim.lr * global_batch / optim.base_batch if optim.scale_lr else optim.lr


def in_steps(schedule, *, steps_per_epoch: int) -> ScheduleConfig:
    """The schedule with every count in optimizer steps: under unit=epochs, warmup_steps, step_size and
    milestones are epochs (x steps_per_epoch), and exponential decays once per epoch (a step schedule of
    one epoch: torch's ExponentialLR stepped at each epoch's end)."""
    plain = ScheduleConfig(**{f.name: getattr(schedule, f.name) for f in dataclasses.fields(ScheduleConfig)})
    plain.milestones = [int(m) for m in plain.milestones]
    if str(schedule.unit) == "steps":
        return plain
    spe = max(1, int(steps_per_epoch))
    plain.warmup_steps *= spe
    plain.step_size *= spe
    plain.milestones = [m * spe for m in plain.milestones]
    if str(plain.name) == "exponential":
        plain.name, plain.step_size = ScheduleName.step, spe
    return plain


def lr_factor(schedule, step: int, *, total_steps: int) -> float:
    """The learning rate of optimizer step `step` (0-based) as a share of the (scaled) lr."""
    warmup = schedule.warmup_steps
    if step < warmup:
        start = schedule.warmup_start_factor
        return start + (1.0 - start) * step / warmup
    k = step - warmup  # the schedule's own step count
    span = max(1, total_steps - warmup)  # its steps
    name = str(schedule.name)
    if name == "constant":
        return 1.0
    if name == "step":
        return schedule.gamma ** (k // schedule.step_size)
    if name == "multistep":
        return schedule.gamma ** sum(1 for m in schedule.milestones if m <= k)
    if name == "cosine":
        low = schedule.min_lr_factor
        return low + (1.0 - low) * (1.0 + math.cos(math.pi * min(k, span) / span)) / 2.0
    if name == "exponential":
        return schedule.gamma**k
    if name == "polynomial":
        return (1.0 - min(k, span) / span) ** schedule.power
    raise ValueError(f"unknown schedule {name!r}")
