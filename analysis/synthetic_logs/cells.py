"""What a synthetic run is (SynthCell: its cell, its fate, its study settings) and the campaigns
`ddlbench synthetic-logs --size` writes: small (tests, demos), bench (the speed benchmark's 1024 ranks) and
lr (a learning-rate study)."""

from __future__ import annotations

import math
from dataclasses import dataclass

# what becomes of a run: it completes, fails (a summary with the error), dies mid-write (no summary, a
# half last line), has a corrupt line, or was written by a newer schema
FATES = ("completed", "failed", "truncated", "corrupt_line", "schema2")

DEFAULT_SYSTEM = "juwels_booster"


@dataclass(slots=True, frozen=True)
class SynthCell:
    """One run to write."""

    framework: str
    loader: str
    model: str
    world_size: int
    num_nodes: int
    per_gpu_batch: int = 64
    repeat: int = 0
    cache: str = "warm"
    fate: str = "completed"
    telemetry: bool = False
    comm_measured: bool = True  # False: comm_s/comm_exposed_s null (a framework without a comm timer)
    schedule: str | None = None  # optim.schedule.name: logs lr and loss per step, and evaluates
    eval_progress: bool = True  # False: eval.jsonl as written before train_samples/train_s/epochs
    target_top1: float | None = None  # run.target_top1: stop at the first evaluation that reaches it
    # a straggler: the index of the host (node) whose ranks compute slow_factor x slower; the other ranks
    # wait for them in backward's all-reduce every step (bwd_s, comm_s and comm_exposed_s grow by the wait)
    slow_host: int | None = None
    slow_factor: float = 1.3
    system: str = DEFAULT_SYSTEM  # system.name: cells that differ only in it pair across systems


def bench_cells(gpus_per_node: int = 4) -> list[SynthCell]:
    """The speed benchmark's campaign: 1024 ranks in all (scaling grid, model depths, Stash pairs,
    repeats, a failed, a truncated, a corrupt-line and a schema-2 run)."""
    cells: list[SynthCell] = []

    def nodes(n: int) -> int:
        return max(1, math.ceil(n / gpus_per_node))

    fates = {
        ("deepspeed", "native", 64): "failed",
        ("horovod", "dali", 32): "truncated",
        ("ddp", "native", 16): "corrupt_line",
    }
    for framework in ("ddp", "horovod", "deepspeed"):
        for loader in ("native", "dali"):
            for n in (4, 8, 16, 32, 64):  # 744 ranks
                cells.append(
                    SynthCell(
                        framework,
                        loader,
                        "resnet50",
                        n,
                        nodes(n),
                        fate=fates.get((framework, loader, n), "completed"),
                        telemetry=n == 8,
                    )
                )
    for model in ("resnet101", "resnet152"):  # 240 ranks
        for framework in ("ddp", "horovod", "deepspeed"):
            for n in (8, 32):
                cells.append(SynthCell(framework, "dali", model, n, nodes(n)))
    cells += [  # Stash pairs for DDP ResNet-50: 17 ranks
        SynthCell("ddp", "synthetic", "resnet50", 1, 1),
        SynthCell("ddp", "synthetic", "resnet50", 4, 1),
        SynthCell("ddp", "synthetic", "resnet50", 4, 2),
        SynthCell("ddp", "native", "resnet50", 4, 1, cache="cold", repeat=1),
        SynthCell("ddp", "dali", "resnet50", 4, 1, cache="cold", repeat=1),
    ]
    for repeat in (2, 3):  # repeats for confidence intervals: 16 + 2 ranks
        cells += [
            SynthCell("ddp", "native", "resnet50", 4, 1, repeat=repeat),
            SynthCell("ddp", "dali", "resnet50", 4, 1, repeat=repeat),
            SynthCell("ddp", "synthetic", "resnet50", 1, 1, repeat=repeat),
        ]
    cells.append(SynthCell("ddp", "native", "resnet50", 4, 1, repeat=4, fate="truncated"))  # 4 ranks
    cells.append(SynthCell("ddp", "native", "resnet50", 1, 1, repeat=9, fate="schema2"))  # 1 rank
    assert sum(c.world_size for c in cells) == 1024, sum(c.world_size for c in cells)
    return cells


def small_cells() -> list[SynthCell]:
    """A tiny campaign (tests, demos): two frameworks x two loaders x 1/2/4 ranks, and the broken kinds."""
    cells = [
        SynthCell(f, loader, "resnet50", n, 1 if n < 4 else 2)
        for f in ("ddp", "horovod")
        for loader in ("native", "dali")
        for n in (1, 2, 4)
    ]
    cells += [
        SynthCell("ddp", "native", "resnet50", 2, 1, repeat=1, fate="failed"),
        SynthCell("ddp", "native", "resnet50", 2, 1, repeat=2, fate="truncated"),
        SynthCell("ddp", "dali", "resnet50", 2, 1, repeat=1, fate="corrupt_line", telemetry=True),
        SynthCell("ddp", "native", "resnet50", 1, 1, repeat=3, fate="schema2"),
    ]
    return cells


def lr_study_cells(
    gpus: tuple[int, ...] = (1, 2, 4),
    *,
    schedules: tuple[str, ...] = ("step", "cosine", "exponential"),
    per_gpu_batch: int = 64,
    repeats: int = 1,
    target_top1: float | None = None,
    eval_progress: bool = True,
) -> list[SynthCell]:
    """A learning-rate study: every schedule at every GPU count (the global batch grows with the GPUs,
    per_gpu_batch each), DDP with DALI, `repeats` runs of each cell, lr_study.STUDY_EPOCHS epochs evaluated after
    each (as conf/experiment/aach2023_lr_cpu.yaml)."""
    return [
        SynthCell(
            "ddp",
            "dali",
            "resnet50",
            n,
            max(1, math.ceil(n / 4)),
            per_gpu_batch=per_gpu_batch,
            repeat=repeat,
            schedule=schedule,
            eval_progress=eval_progress,
            target_top1=target_top1,
        )
        for schedule in schedules
        for n in gpus
        for repeat in range(repeats)
    ]
