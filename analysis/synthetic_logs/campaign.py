"""write_campaign: one run directory per synthetic cell, every file as the ranks write it (config.yaml,
meta.json, rank<R>.jsonl, summary.json; eval.jsonl, telemetry and commbench.json where asked), with each
cell's fate (completed, failed, truncated, a corrupt line, schema version 2)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from analysis.synthetic_logs import lr_study
from analysis.synthetic_logs.cells import DEFAULT_SYSTEM, FATES, SynthCell
from analysis.synthetic_logs.commbench import write_commbench
from analysis.synthetic_logs.telemetry import write_telemetry
from analysis.synthetic_logs.timing import phase_times
from benchmarks.errors import ConfigError


@dataclass(slots=True)
class SynthStats:
    num_runs: int = 0
    num_ranks: int = 0
    num_step_rows: int = 0
    num_bytes: int = 0
    fates: dict[str, int] = field(default_factory=dict)


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
        f"  warmup_steps: {warmup}\n  steps: {steps - warmup}\n" + lr_study.study_yaml(cell)
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
        steps_per_epoch = lr_study.steps_per_epoch(cell, steps)
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
        phases = phase_times(cell, steps, rng, gpus_per_node)
        written_steps = steps if cell.fate not in ("failed", "truncated") else int(steps * 0.6)
        training = evals = None
        if cell.schedule is not None:
            lr, annealed, loss = lr_study.training(cell, steps, rng)
            training = (lr, loss)
            evals = lr_study.evaluations(cell, steps, warmup_steps, phases["step_s"].max(axis=0), annealed, rng)
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
            write_telemetry(run_dir, cell, float(phases["step_s"].max(axis=0).sum()), rng, gpus_per_node)
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
                **lr_study.target_fields(cell, evals),
            }
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    if commbench:
        write_commbench(out / campaign / "commbench.json", gpus_per_node)
    return stats
