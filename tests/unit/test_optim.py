"""optim / optim.schedule: each schedule's learning rate step by step against torch's own schedulers, the
linear scaling rule, LARS against its formula, the one-line errors, and the rank log's lr and loss."""

from __future__ import annotations

import json
import math

import pytest
import torch

from benchmarks.errors import ConfigError
from benchmarks.optim import LARS, LrSchedule, build_optimizer
from benchmarks.optim_configs import OptimConfig, ScheduleConfig, ScheduleName, check, lr_factor

TOTAL, WARMUP = 60, 7


def torch_lrs(main, *, warmup: int, start: float = 0.001) -> list[float]:
    """lr of every step from torch's schedulers: LinearLR warm-up, then `main`, in a SequentialLR."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.4)
    if warmup:
        ramp = torch.optim.lr_scheduler.LinearLR(opt, start_factor=start, end_factor=1.0, total_iters=warmup)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [ramp, main(opt)], [warmup])
    else:
        sched = main(opt)
    out = []
    for _ in range(TOTAL):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


CASES = {
    "constant": (dict(), lambda o: torch.optim.lr_scheduler.ConstantLR(o, factor=1.0, total_iters=0)),
    "step": (dict(step_size=9, gamma=0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=9, gamma=0.5)),
    "multistep": (
        dict(milestones=[10, 25, 40], gamma=0.3),
        lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[10, 25, 40], gamma=0.3),
    ),
    "cosine": (
        dict(min_lr_factor=0.0),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=TOTAL - WARMUP, eta_min=0.0),
    ),
    "exponential": (dict(gamma=0.93), lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.93)),
    "polynomial": (
        dict(power=2.0),
        lambda o: torch.optim.lr_scheduler.PolynomialLR(o, total_iters=TOTAL - WARMUP, power=2.0),
    ),
}


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns about SequentialLR's internal step order
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("warmup", [0, WARMUP])
def test_every_schedule_equals_torchs_step_by_step(name, warmup):
    settings, main = CASES[name]
    schedule = ScheduleConfig(name=ScheduleName(name), warmup_steps=warmup, **settings)
    if warmup == 0 and name in ("cosine", "polynomial"):
        main = {
            "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=TOTAL),
            "polynomial": lambda o: torch.optim.lr_scheduler.PolynomialLR(o, total_iters=TOTAL, power=2.0),
        }[name]
    ours = [0.4 * lr_factor(schedule, k, total_steps=TOTAL) for k in range(TOTAL)]
    theirs = torch_lrs(main, warmup=warmup)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12), [
        (k, a, b) for k, (a, b) in enumerate(zip(ours, theirs)) if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    ]


def _torch_per_epoch(main, *, epochs: int, steps_per_epoch: int, warmup_epochs: int) -> list[float]:
    """lr of every step with torch's schedulers stepped once per epoch (the ImageNet recipes' way)."""
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.4)
    sched = main(opt)
    ramp = warmup_epochs * steps_per_epoch
    out = []
    for step in range(epochs * steps_per_epoch):
        if step < ramp:  # a per-step linear warm-up, as ours
            out.append(0.4 * (0.001 + 0.999 * step / ramp))
        else:
            out.append(opt.param_groups[0]["lr"])
        if step >= ramp and (step + 1 - ramp) % steps_per_epoch == 0:
            opt.step()
            sched.step()
    return out


@pytest.mark.parametrize(
    "name, settings, main",
    [
        ("exponential", dict(gamma=0.8), lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.8)),
        ("step", dict(step_size=3, gamma=0.5), lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
        (
            "multistep",
            dict(milestones=[2, 5], gamma=0.1),
            lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[2, 5], gamma=0.1),
        ),
    ],
)
@pytest.mark.parametrize("warmup_epochs", [0, 2])
def test_epoch_units_equal_torchs_schedulers_stepped_per_epoch(name, settings, main, warmup_epochs):
    """optim.schedule.unit=epochs: counts in epochs, exponential decays once per epoch (a campaign's schedule
    is then the same in epochs at every global batch)."""
    from benchmarks.optim_configs import ScheduleUnit, in_steps

    epochs, spe = 9, 7
    schedule = ScheduleConfig(name=ScheduleName(name), unit=ScheduleUnit.epochs, warmup_steps=warmup_epochs, **settings)
    plain = in_steps(schedule, steps_per_epoch=spe)
    ours = [0.4 * lr_factor(plain, k, total_steps=epochs * spe) for k in range(epochs * spe)]
    theirs = _torch_per_epoch(main, epochs=epochs, steps_per_epoch=spe, warmup_epochs=warmup_epochs)
    assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_the_linear_scaling_rule_and_the_schedule_on_the_optimizer():
    optim = OptimConfig(
        lr=0.1, scale_lr=True, base_batch=256, schedule=ScheduleConfig(name=ScheduleName.step, step_size=2)
    )
    model = torch.nn.Linear(3, 2)
    opt = build_optimizer(model.parameters(), optim, global_batch=8192)
    assert opt.param_groups[0]["lr"] == pytest.approx(3.2)  # 0.1 x 8192 / 256
    schedule = LrSchedule(optim, global_batch=8192, total_steps=10)
    assert [schedule.apply(opt, k) for k in range(5)] == pytest.approx([3.2, 3.2, 0.32, 0.32, 0.032])
    assert opt.param_groups[0]["lr"] == pytest.approx(0.032)


def test_lars_scales_each_weights_step_by_its_trust_ratio():
    torch.manual_seed(0)
    w = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    opt = LARS([w, b], lr=0.5, momentum=0.0, weight_decay=0.01, trust_coefficient=0.02)
    (w.sum() * 3 + (b * b).sum()).backward()
    w0, b0, gw, gb = w.detach().clone(), b.detach().clone(), w.grad.clone(), b.grad.clone()
    opt.step()
    trust = 0.02 * w0.norm() / (gw.norm() + 0.01 * w0.norm())
    assert torch.allclose(w.detach(), w0 - 0.5 * trust * (gw + 0.01 * w0))
    assert torch.allclose(b.detach(), b0 - 0.5 * gb)  # a 1-D tensor: the plain step, no decay


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(lr=0.0), "optim.lr=0.0 must be in (0, inf)"),
        (dict(momentum=1.0), "optim.momentum=1.0 must be in [0, 1)"),
        (dict(label_smoothing=1.5), "optim.label_smoothing=1.5 must be in [0, 1)"),
        (dict(nesterov=True, momentum=0.0), "optim.nesterov=true needs optim.name=sgd and optim.momentum > 0"),
        (dict(betas=[0.9]), "optim.betas=[0.9] must be two numbers"),
        (dict(schedule=ScheduleConfig(name=ScheduleName.multistep)), "needs milestones"),
        (dict(schedule=ScheduleConfig(milestones=[30, 10])), "must be increasing step counts"),
        (dict(schedule=ScheduleConfig(gamma=0.0)), "optim.schedule.gamma=0.0 must be in (0, 1]"),
        (dict(schedule=ScheduleConfig(warmup_steps=-1)), "optim.schedule.warmup_steps=-1 must be >= 0"),
    ],
)
def test_bad_settings_are_one_line_errors(change, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        check(OptimConfig(**change))


def test_the_rank_log_has_each_steps_lr_and_loss(tmp_path, ddlbench):
    result = ddlbench(
        "run",
        "model=simple_cnn",
        "system.ranks_per_node=1",
        "run.steps=6",
        "run.warmup_steps=2",
        "run.per_gpu_batch=4",
        "optim.schedule.name=cosine",
        "optim.schedule.warmup_steps=3",
        "optim.label_smoothing=0.1",
        f"run.root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (log,) = tmp_path.glob("default/*/rank0.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    schedule = ScheduleConfig(name=ScheduleName.cosine, warmup_steps=3)
    assert [r["lr"] for r in records] == pytest.approx([0.1 * lr_factor(schedule, k, total_steps=8) for k in range(8)])
    assert all(math.isfinite(r["loss"]) and r["loss"] > 0 for r in records)
