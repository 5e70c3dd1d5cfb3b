"""A synthetic learning-rate study (cells with `schedule` set: cells.lr_study_cells): each step's lr (the
schedule's closed form, benchmarks/optim_configs.lr_factor) and training loss, and the evaluations
(eval.jsonl): top-1 rises with training and as the lr anneals, towards a ceiling that falls with the global
batch, with cosine a little ahead at small batches and exponential at the largest (the shape of seed study
A's finding, not its numbers). With `target_top1` the run stops at the first evaluation that reaches it.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.synthetic_logs.cells import SynthCell
from benchmarks.optim_configs import ScheduleConfig, ScheduleName, ScheduleUnit, in_steps, lr_factor

# the learning-rate study: its epochs (an evaluation after each), lr at batch 256 (the linear scaling
# rule), a ceiling of top-1 at 256, what a schedule adds to it per doubling of the global batch beyond
# 256, and an evaluation's seconds
STUDY_EPOCHS, BASE_LR, BASE_BATCH, TOP1_CEILING, EVAL_S = 8, 0.1, 256, 0.765, 0.4
SCHEDULE_EDGE = {"cosine": (0.006, -0.0015), "exponential": (0.0, 0.0005), "step": (0.0, 0.0)}


def steps_per_epoch(cell: SynthCell, steps: int) -> int:
    """A run's steps in one epoch: a study cell runs STUDY_EPOCHS epochs, any other run two."""
    return max(1, steps // (STUDY_EPOCHS if cell.schedule else 2))


def _schedule(cell: SynthCell) -> ScheduleConfig:
    """The study's schedule in epochs (aach2023_lr_cpu's): one warm-up epoch; step: x 0.5 every 3 epochs;
    exponential: x 0.5 every epoch; cosine: to 0 at the end."""
    return ScheduleConfig(
        name=ScheduleName(cell.schedule), unit=ScheduleUnit.epochs, warmup_steps=1, step_size=3, gamma=0.5
    )


def training(cell: SynthCell, steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step of a study cell: its lr, how far the lr has annealed (1 - lr / peak), and the loss per
    rank x step."""
    schedule = in_steps(_schedule(cell), steps_per_epoch=steps_per_epoch(cell, steps))
    factor = np.array([lr_factor(schedule, i, total_steps=steps) for i in range(steps)])
    lr = BASE_LR * cell.per_gpu_batch * cell.world_size / BASE_BATCH * factor
    annealed = np.where(np.arange(steps) < schedule.warmup_steps, 0.0, 1.0 - factor)
    progress = np.arange(steps) / steps
    loss = 0.8 + 6.1 * np.exp(-4 * progress) - 0.3 * annealed
    return lr, annealed, loss * rng.lognormal(0.0, 0.03, size=(cell.world_size, steps))


def evaluations(
    cell: SynthCell, steps: int, warmup: int, step_s: np.ndarray, annealed: np.ndarray, rng: np.random.Generator
) -> list[dict]:
    """eval.jsonl of a study cell: an evaluation after each epoch (and after the last step), up to the
    first that reaches target_top1 after the warm-up steps, where there is one (the run stops there)."""
    doublings = max(0.0, math.log2(cell.per_gpu_batch * cell.world_size / BASE_BATCH))
    base, per_doubling = SCHEDULE_EDGE.get(str(cell.schedule), (0.0, 0.0))
    ceiling = TOP1_CEILING - 0.0025 * doublings**2 + base + per_doubling * doublings
    spe = steps_per_epoch(cell, steps)
    records = []
    for j, done in enumerate(sorted({*range(spe, steps + 1, spe), steps})):
        top1 = ceiling * (1 - math.exp(-3.5 * done / steps)) * (0.9 + 0.1 * annealed[done - 1])
        top1 = float(np.clip(top1 + rng.normal(0, 0.002), 0, 1))
        record = {
            "step": done,
            "epoch": (done - 1) // spe,
            "samples": 10_000,
            "top1": round(top1, 6),
            "top5": round(min(1.0, top1 + 0.15), 6),
            "loss": round(4.0 * (1 - top1) + 0.5, 6),
            "eval_s": EVAL_S,
        }
        if cell.eval_progress:
            record.update(
                train_samples=done * cell.per_gpu_batch * cell.world_size,
                train_s=round(float(step_s[:done].sum()) + EVAL_S * j, 6),
                epochs=round(done / spe, 4),
            )
        records.append(record)
        if cell.target_top1 is not None and top1 >= cell.target_top1 and done > warmup:
            break
    return records


def study_yaml(cell: SynthCell) -> str:
    """A study cell's settings: its evaluation cadence, its target, and its optimizer and schedule
    (config.yaml's run block ends the text before, so the run keys come first)."""
    if cell.schedule is None:
        return ""
    schedule = _schedule(cell)
    target = f"  target_top1: {cell.target_top1}\n" if cell.target_top1 is not None else ""
    return (
        f"  eval_every_epochs: 1\n{target}"
        f"optim:\n  name: sgd\n  lr: {BASE_LR}\n  base_batch: {BASE_BATCH}\n  scale_lr: true\n"
        f"  schedule:\n    name: {cell.schedule}\n    unit: epochs\n    warmup_steps: {schedule.warmup_steps}\n"
        f"    step_size: {schedule.step_size}\n    gamma: {schedule.gamma}\n"
    )


def target_fields(cell: SynthCell, evals: list[dict] | None) -> dict:
    """summary.json's time-to-accuracy fields (summary_schema.TARGET_FIELDS) of a cell with a target."""
    if cell.target_top1 is None:
        return {}
    hit = next((e for e in evals or [] if e["top1"] >= cell.target_top1), None) or {}
    return {
        "target_top1": cell.target_top1,
        "target_reached": bool(hit),
        "time_to_target_s": hit.get("train_s"),
        "samples_to_target": hit.get("train_samples"),
        "steps_to_target": hit.get("step"),
    }
