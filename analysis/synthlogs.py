"""Realistic synthetic campaign logs (run directories as launchers/lifecycle/rank.py writes them) for tests and
the analysis speed benchmark: many ranks, many steps, failures, truncations, a corrupt line, an
unknown schema version, telemetry and commbench files (collectives, and the GPU tests' P2P
matrix and concurrent host-to-device copies).

The timing model is coarse but has the seed studies' shape: compute per model depth, ring-allreduce
time that grows with GPU count and jumps when it leaves the node, partly overlapped with backward
(DDP > Horovod > DeepSpeed); native loading on CPUs is slower than DALI; lognormal jitter per rank
and occasional straggler steps, so the slowest rank matters. A cell with `slow_host` has a slow node: its
ranks compute slow_factor x slower and the others wait for them every step (synchronous training).

Cells of a learning-rate study (`schedule` set: lr_study_cells) also log each step's lr (the schedule's
closed form, benchmarks/optim_configs.lr_factor) and training loss, and evaluate (eval.jsonl): top-1
rises with training and as the lr anneals, towards a ceiling that falls with the global batch, with
cosine a little ahead at small batches and exponential at the largest (the shape of seed study A's
finding, not its numbers). With `target_top1` the run stops at the first evaluation that reaches it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.errors import ConfigError
from benchmarks.optim_configs import ScheduleConfig, ScheduleName, ScheduleUnit, in_steps, lr_factor

# seconds per image of fwd / bwd / opt on one A100-class GPU (fp32-ish), and gradient size in bytes
MODELS = {
    "resnet50": (0.00070, 0.00140, 0.00010, 102e6),
    "resnet101": (0.00125, 0.00250, 0.00018, 178e6),
    "resnet152": (0.00180, 0.00360, 0.00025, 241e6),
}
# fraction of the allreduce hidden behind backward
OVERLAP = {"ddp": 0.75, "horovod": 0.6, "deepspeed": 0.4}
# host time per image to decode+augment, split over the workers of one GPU
PREP_S_PER_IMAGE = {"native": 0.0080 / 8, "dali": 0.0025 / 8, "synthetic": 0.0}
FATES = ("completed", "failed", "truncated", "corrupt_line", "schema2")
# the learning-rate study: its epochs (an evaluation after each), lr at batch 256 (the linear scaling
# rule), a ceiling of top-1 at 256, what a schedule adds to it per doubling of the global batch beyond
# 256, and an evaluation's seconds
STUDY_EPOCHS, BASE_LR, BASE_BATCH, TOP1_CEILING, EVAL_S = 8, 0.1, 256, 0.765, 0.4
SCHEDULE_EDGE = {"cosine": (0.006, -0.0015), "exponential": (0.0, 0.0005), "step": (0.0, 0.0)}


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


@dataclass(slots=True)
class SynthStats:
    num_runs: int = 0
    num_ranks: int = 0
    num_step_rows: int = 0
    num_bytes: int = 0
    fates: dict[str, int] = field(default_factory=dict)


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
    per_gpu_batch each), DDP with DALI, `repeats` runs of each cell, STUDY_EPOCHS epochs evaluated after
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


def _steps_per_epoch(cell: SynthCell, steps: int) -> int:
    return max(1, steps // (STUDY_EPOCHS if cell.schedule else 2))


def _schedule(cell: SynthCell) -> ScheduleConfig:
    """The study's schedule in epochs (aach2023_lr_cpu's): one warm-up epoch; step: x 0.5 every 3 epochs;
    exponential: x 0.5 every epoch; cosine: to 0 at the end."""
    return ScheduleConfig(
        name=ScheduleName(cell.schedule), unit=ScheduleUnit.epochs, warmup_steps=1, step_size=3, gamma=0.5
    )


def _training(cell: SynthCell, steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step of a study cell: its lr, how far the lr has annealed (1 - lr / peak), and the loss per
    rank x step."""
    schedule = in_steps(_schedule(cell), steps_per_epoch=_steps_per_epoch(cell, steps))
    factor = np.array([lr_factor(schedule, i, total_steps=steps) for i in range(steps)])
    lr = BASE_LR * cell.per_gpu_batch * cell.world_size / BASE_BATCH * factor
    annealed = np.where(np.arange(steps) < schedule.warmup_steps, 0.0, 1.0 - factor)
    progress = np.arange(steps) / steps
    loss = 0.8 + 6.1 * np.exp(-4 * progress) - 0.3 * annealed
    return lr, annealed, loss * rng.lognormal(0.0, 0.03, size=(cell.world_size, steps))


def _evaluations(
    cell: SynthCell, steps: int, warmup: int, step_s: np.ndarray, annealed: np.ndarray, rng: np.random.Generator
) -> list[dict]:
    """eval.jsonl of a study cell: an evaluation after each epoch (and after the last step), up to the
    first that reaches target_top1 after the warm-up steps, where there is one (the run stops there)."""
    doublings = max(0.0, math.log2(cell.per_gpu_batch * cell.world_size / BASE_BATCH))
    base, per_doubling = SCHEDULE_EDGE.get(str(cell.schedule), (0.0, 0.0))
    ceiling = TOP1_CEILING - 0.0025 * doublings**2 + base + per_doubling * doublings
    spe = _steps_per_epoch(cell, steps)
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


def _phase_times(
    cell: SynthCell, steps: int, rng: np.random.Generator, gpus_per_node: int = 4
) -> dict[str, np.ndarray]:
    """Per rank x step phase times (arrays of shape world_size x steps)."""
    fwd1, bwd1, opt1, grad_bytes = MODELS[cell.model]
    n, b = cell.world_size, cell.per_gpu_batch
    shape = (n, steps)
    jitter = rng.lognormal(0.0, 0.03, size=shape)
    fwd = fwd1 * b * jitter
    bwd = bwd1 * b * jitter * rng.lognormal(0.0, 0.01, size=shape)
    opt = np.full(shape, opt1 * b) * rng.lognormal(0.0, 0.02, size=shape)
    if n > 1:
        # ring allreduce: 2(N-1)/N of the gradient over the slowest link, plus per-hop latency
        bw = 80e9 if cell.num_nodes == 1 else 6e9 / (1 + 0.15 * math.log2(cell.num_nodes))
        comm1 = 2 * (n - 1) / n * grad_bytes / bw + 2 * (n - 1) * 60e-6 + 0.004 * math.log2(n)
        comm = comm1 * rng.lognormal(0.0, 0.08, size=shape)
        exposed = comm * (1 - OVERLAP.get(cell.framework, 0.5))
        bwd = bwd + comm - exposed  # the overlapped part runs during backward
    else:
        comm = exposed = np.zeros(shape)
    prep = PREP_S_PER_IMAGE[cell.loader] * b * (3.0 if cell.cache == "cold" else 1.0)
    # the loader prefetches during compute: only what it cannot hide blocks the host
    hidden = 0.1 * (fwd + bwd)
    data = np.maximum(prep * rng.lognormal(0.0, 0.15, size=shape) - hidden, 0) + 2e-4 * jitter
    # a shared file system slows native loading as more nodes read from it
    data = data * (1 + 0.05 * math.log2(cell.num_nodes)) if cell.loader == "native" else data
    other = np.full(shape, 0.0015) * jitter
    step = data + fwd + bwd + opt + exposed + other
    # stragglers: a random rank is slow on ~1% of steps
    slow = rng.random(steps) < 0.01
    if slow.any():
        step[rng.integers(0, n, size=slow.sum()), np.flatnonzero(slow)] *= 1.5
    if cell.slow_host is not None:  # no draws of its own: the other cells' numbers stay as they were
        fwd, bwd, opt, comm, exposed, step = _slow_host(
            cell, gpus_per_node, fwd=fwd, bwd=bwd, opt=opt, comm=comm, exposed=exposed, step=step
        )
    return {
        "data_s": data,
        "fwd_s": fwd,
        "bwd_s": bwd,
        "opt_s": opt,
        "comm_s": comm,
        "comm_exposed_s": exposed,
        "step_s": step,
    }


def _slow_host(cell: SynthCell, gpus_per_node: int, **phases: np.ndarray) -> tuple[np.ndarray, ...]:
    """The phases with host cell.slow_host's ranks computing (fwd, bwd, opt) cell.slow_factor x slower, and
    every step synchronous: each rank ends it with the slowest, the others waiting in backward's all-reduce
    (the wait is inside bwd_s, as a rank log's backward holds its exposed collective, and in comm_s and
    comm_exposed_s)."""
    slow = (np.arange(cell.world_size) // gpus_per_node == cell.slow_host)[:, None]
    factor = np.where(slow, cell.slow_factor, 1.0)
    fwd, bwd, opt = (phases[k] * factor for k in ("fwd", "bwd", "opt"))
    step = phases["step"] + (fwd + bwd + opt) - (phases["fwd"] + phases["bwd"] + phases["opt"])
    wait = step.max(axis=0, keepdims=True) - step
    return fwd, bwd + wait, opt, phases["comm"] + wait, phases["exposed"] + wait, step + wait


def _lines(
    rank: int,
    cell: SynthCell,
    phases: dict[str, np.ndarray],
    steps: int,
    warmup: int,
    steps_per_epoch: int,
    comm_measured: bool,
    training: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[str]:
    cols = {k: v[rank].tolist() for k, v in phases.items()}
    lr, loss = (training[0].tolist(), training[1][rank].tolist()) if training is not None else (None, None)
    b = cell.per_gpu_batch
    out = []
    data, fwd, bwd, opt, comm, exp, step = (
        cols[k] for k in ("data_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "comm_exposed_s", "step_s")
    )
    for i in range(steps):
        comm_text = f'{comm[i]:.6g},"comm_exposed_s":{exp[i]:.6g}' if comm_measured else 'null,"comm_exposed_s":null'
        out.append(
            f'{{"step":{i},"epoch":{i // steps_per_epoch},"step_in_epoch":{i % steps_per_epoch},"samples":{b},'
            f'"warmup":{"true" if i < warmup else "false"},"comm_s":{comm_text},"data_s":{data[i]:.6g},'
            f'"fwd_s":{fwd[i]:.6g},"bwd_s":{bwd[i]:.6g},"opt_s":{opt[i]:.6g},"step_s":{step[i]:.6g}'
            + (f',"loss":{loss[i]:.6g},"lr":{lr[i]:.6g}' if lr is not None else "")
            + "}\n"
        )
    return out


def _config_yaml(cell: SynthCell, campaign: str, steps: int, warmup: int, gpus_per_node: int) -> str:
    depth = "".join(ch for ch in cell.model if ch.isdigit()) or "null"
    return (
        f"framework:\n  name: {cell.framework}\nloader:\n  name: {cell.loader}\nmodel:\n  arch: resnet\n"
        f"  depth: {depth}\nprecision:\n  name: amp_bf16\ndata:\n  path: /p/scratch/imagenet\n"
        f"  cache: {cell.cache}\n{'  val_split: 0.02' + chr(10) if cell.schedule else ''}system:\n  name: {cell.system}\n  device: cuda\n"
        f"  ranks_per_node: {gpus_per_node}\n  gpus_per_node: {gpus_per_node}\n"
        f"run:\n  campaign: {campaign}\n  repeat: {cell.repeat}\n  per_gpu_batch: {cell.per_gpu_batch}\n"
        f"  warmup_steps: {warmup}\n  steps: {steps - warmup}\n" + _study_yaml(cell)
    )


def _study_yaml(cell: SynthCell) -> str:
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


def write_campaign(
    out: Path,
    cells: list[SynthCell],
    *,
    steps: int = 500,
    warmup_steps: int = 10,
    seed: int = 0,
    campaign: str = "synth",
    gpus_per_node: int = 4,
    commbench: bool = True,
) -> SynthStats:
    """Write one run directory per cell below out/<campaign>/ (out must be new or empty)."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty (never overwritten); pass a new folder")
    if steps < 2 or not 0 <= warmup_steps < steps:
        raise ConfigError(f"--steps {steps} / --warmup {warmup_steps}: need steps >= 2 and 0 <= warmup < steps")
    rng = np.random.default_rng(seed)
    stats = SynthStats()
    for cell in cells:
        steps_per_epoch = _steps_per_epoch(cell, steps)
        if cell.fate not in FATES:
            raise ConfigError(f"fate={cell.fate!r} is not one of {', '.join(FATES)}")
        study = f"-{cell.schedule}" if cell.schedule else ""
        study += f"-t{cell.target_top1:g}" if cell.target_top1 is not None else ""
        study += f"-slow{cell.slow_host}" if cell.slow_host is not None else ""
        study += f"-{cell.system}" if cell.system != DEFAULT_SYSTEM else ""
        name = (
            f"{cell.framework}-{cell.loader}-{cell.model}-g{cell.world_size}-n{cell.num_nodes}"
            f"-b{cell.per_gpu_batch}{study}-r{cell.repeat}"
        )
        run_dir = out / campaign / name
        run_dir.mkdir(parents=True)
        version = 2 if cell.fate == "schema2" else 1
        phases = _phase_times(cell, steps, rng, gpus_per_node)
        written_steps = steps if cell.fate not in ("failed", "truncated") else int(steps * 0.6)
        training = evals = None
        if cell.schedule is not None:
            lr, annealed, loss = _training(cell, steps, rng)
            training = (lr, loss)
            evals = _evaluations(cell, steps, warmup_steps, phases["step_s"].max(axis=0), annealed, rng)
            evals = [e for e in evals if e["step"] <= written_steps]
            if cell.target_top1 is not None and evals and evals[-1]["top1"] >= cell.target_top1:
                written_steps = min(written_steps, evals[-1]["step"])  # stopped at the target
            (run_dir / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evals))
        (run_dir / "config.yaml").write_text(_config_yaml(cell, campaign, steps, warmup_steps, gpus_per_node))
        hosts = [f"jwb{0x100 + i:04d}" for i in range(cell.num_nodes)]
        meta = {
            "schema_version": version,
            "started": "2026-11-20T10:00:00+0000",
            "launcher": "srun",
            "world_size": cell.world_size,
            "num_nodes": cell.num_nodes,
            "git_sha": "0" * 40,
            "git_dirty": False,
            "versions": {"torch": "2.11.0", "nvidia-dali-cuda120": "1.52.0"},
            "hardware": {
                "host": hosts[0],
                "hosts": hosts,
                "cuda": "12.8",
                "nccl": "2.27.3",
                "gpus": ["NVIDIA A100-SXM4-40GB"] * min(cell.world_size, gpus_per_node),
            },
            "env": {"NCCL_IB_TIMEOUT": "20"},
        }
        (run_dir / "meta.json").write_text(json.dumps(meta, indent=1))
        for rank in range(cell.world_size):
            header = {
                "kind": "header",
                "schema_version": version,
                "rank": rank,
                "local_rank": rank % gpus_per_node,
                "host": hosts[rank // gpus_per_node],
                "device": f"cuda:{rank % gpus_per_node}",
                "pid": 1000 + rank,
                "steps_per_epoch": steps_per_epoch,
            }
            lines = [
                json.dumps(header, separators=(",", ":")) + "\n",
                *_lines(rank, cell, phases, written_steps, warmup_steps, steps_per_epoch, cell.comm_measured, training),
            ]
            if cell.fate == "truncated" and rank == cell.world_size - 1:
                lines[-1] = lines[-1][: len(lines[-1]) // 2]  # the rank died mid-write
            if cell.fate == "corrupt_line" and rank == min(3, cell.world_size - 1):
                lines[len(lines) // 2] = '{"step":\x00\x00 garbage\n'
            text = "".join(lines)
            (run_dir / f"rank{rank}.jsonl").write_text(text)
            stats.num_bytes += len(text)
            stats.num_step_rows += len(lines) - 1
        stats.num_ranks += cell.world_size
        stats.num_runs += 1
        stats.fates[cell.fate] = stats.fates.get(cell.fate, 0) + 1
        if cell.telemetry:
            _write_telemetry(run_dir, cell, float(phases["step_s"].max(axis=0).sum()), rng, gpus_per_node)
        measured = phases["step_s"][:, warmup_steps:written_steps].max(axis=0)
        wall_s = float(measured.sum()) * 1.002
        if cell.fate == "failed":
            summary = {
                "schema_version": 1,
                "status": "failed",
                "finished": "2026-11-20T10:05:00+0000",
                "error": "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
                "(run with NCCL_DEBUG=INFO for details)",
            }
        elif cell.fate == "truncated":
            continue
        else:
            samples = cell.per_gpu_batch * cell.world_size * (written_steps - warmup_steps)
            summary = {
                "schema_version": version,
                "status": "completed",
                "finished": "2026-11-20T10:05:00+0000",
                "framework": cell.framework,
                "loader": cell.loader,
                "model": cell.model,
                "precision": "amp_bf16",
                "world_size": cell.world_size,
                "num_nodes": cell.num_nodes,
                "per_gpu_batch": cell.per_gpu_batch,
                "global_batch": cell.per_gpu_batch * cell.world_size,
                "warmup_steps": warmup_steps,
                "measured_steps": written_steps - warmup_steps,
                "measured_samples": samples,
                "wall_s": wall_s,
                "throughput_img_s": samples / wall_s,
                "per_gpu_img_s": samples / wall_s / cell.world_size,
                "campaign": campaign,
                "repeat": cell.repeat,
                "last_loss": 6.9,
                **_target_fields(cell, evals),
            }
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if commbench:
        _write_commbench(out / campaign / "commbench.json", gpus_per_node)
    return stats


def _target_fields(cell: SynthCell, evals: list[dict] | None) -> dict:
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


def _write_telemetry(
    run_dir: Path, cell: SynthCell, duration_s: float, rng: np.random.Generator, gpus_per_node: int
) -> None:
    """telemetry_rank<R>.jsonl as benchmarks/telemetry.py writes them (Unix t_s, units in the names)."""
    period = max(duration_s / 120, 0.1)
    busy = 0.93 if cell.loader == "dali" else 0.78
    start = 1_763_632_800.0  # 2025-11-20T10:00:00Z
    for rank in range(cell.world_size):
        t = start + rng.uniform(0, period) + np.arange(0, duration_s, period)  # ranks sample at their own times
        util = np.clip(100 * busy + rng.normal(0, 4, len(t)), 0, 100)
        util[: max(1, len(t) // 20)] = rng.uniform(5, 30)  # start-up
        mem = 31.0e9 + rng.normal(0, 0.1e9, len(t))
        cpu = np.clip((85 if cell.loader == "native" else 35) + rng.normal(0, 5, len(t)), 0, 100)
        # the fields below follow the drawn ones (no draws of their own: the other runs' numbers stay as they were)
        host_mem = 180e9 + 0.2e9 * cpu
        nvlink = 0.0 if cell.world_size == 1 else 0.4e9  # bytes/s per % util: gradients to the node's peers
        lines = [
            json.dumps(
                {
                    "t_s": round(float(ts), 3),
                    "rank": rank,
                    "host": f"jwb{0x100 + rank // gpus_per_node:04d}",
                    "gpu": rank % gpus_per_node,
                    "gpu_util_percent": round(float(util[i]), 1),
                    "gpu_mem_used_bytes": int(mem[i]),
                    "gpu_mem_total_bytes": 40_000_000_000,
                    "gpu_power_w": round(float(90 + 3 * util[i]), 1),
                    "cpu_percent": round(float(cpu[i]), 1),
                    "pcie_rx_bytes_s": round(float(util[i]) * 1e8, -3),
                    "pcie_tx_bytes_s": round(float(util[i]) * 1e7, -3),
                    "nvlink_rx_bytes_s": round(float(util[i]) * nvlink, -3),
                    "nvlink_tx_bytes_s": round(float(util[i]) * nvlink, -3),
                    "host_mem_used_bytes": int(host_mem[i]),
                    "host_mem_total_bytes": 512_000_000_000,
                },
                separators=(",", ":"),
            )
            for i, ts in enumerate(t)
        ]
        (run_dir / f"telemetry_rank{rank}.jsonl").write_text("\n".join(lines) + "\n")


def _write_commbench(path: Path, gpus_per_node: int) -> None:
    rows = []
    for world in (gpus_per_node, 8 * gpus_per_node, 64 * gpus_per_node):
        bw = 80e9 if world <= gpus_per_node else 10e9
        for op, factor in (("all_reduce", 2.0), ("all_gather", 1.0), ("reduce_scatter", 1.0)):
            bus = factor * (world - 1) / world
            for exp in range(10, 31, 2):
                size = 2**exp
                time_s = 25e-6 * math.log2(world) + bus * size / bw
                algbw = size / time_s / 1e9
                rows.append(
                    {
                        "op": op,
                        "size_bytes": size,
                        "algbw_gb_s": round(algbw, 4),
                        "busbw_gb_s": round(algbw * bus, 4),
                        "time_s": time_s,
                        "world_size": world,
                        "backend": "nccl",
                    }
                )
    rows += gpu_test_records(gpus_per_node)
    path.write_text(json.dumps(rows, indent=1))


P2P_GB_S = {1: 300.0, 2: 150.0}  # NVLink bandwidth by GPU distance |i - j|; farther pairs go through the host
P2P_HOST_GB_S, H2D_GB_S = 20.0, 24.0  # one GPU's host copy alone; H2D copies share the host's links


def gpu_test_records(num_gpus: int, *, host: str = "jwb0100") -> list[dict]:
    """benchmarks/commbench/gpu.py's records of one node: the concurrent host-to-device copies of its ranks
    (in rank order), then the P2P matrix (a 256 MiB copy and a 4-byte one per ordered pair; GPUs 1 or 2
    apart have peer access), as commbench's rank 0 writes them."""
    size, rows = 256 * 1024**2, []
    for gpu in range(num_gpus):
        bw = H2D_GB_S * min(1.0, 2 / num_gpus) * (1 - 0.02 * gpu)  # two GPUs saturate the host's links
        rows.append(_gpu_record("h2d_copy", num_gpus, size, bw, host, gpu=gpu, concurrent_gpus=num_gpus))
    for src in range(num_gpus):
        for dst in range(num_gpus):
            if src == dst:
                continue
            bw = P2P_GB_S.get(abs(src - dst), P2P_HOST_GB_S)
            extra = {"src_gpu": src, "dst_gpu": dst, "peer_access": bw != P2P_HOST_GB_S}
            rows.append(_gpu_record("p2p_copy", num_gpus, size, bw, host, **extra))
            rows.append(
                _gpu_record(
                    "p2p_latency", num_gpus, 4, 4 / (2e-6 if extra["peer_access"] else 9e-6) / 1e9, host, **extra
                )
            )
    return rows


def _gpu_record(op: str, world: int, size: int, bw_gb_s: float, host: str, **extra) -> dict:
    time_s = size / bw_gb_s / 1e9
    return {
        "op": op,
        "backend": "cuda",
        "world_size": world,
        "size_bytes": size,
        "time_s": time_s,
        "algbw_gb_s": bw_gb_s,
        "busbw_gb_s": bw_gb_s,
        **extra,
        "host": host,
    }
