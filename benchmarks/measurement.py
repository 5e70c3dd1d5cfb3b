"""What a rank measures and records of its run, apart from how the run is started, watched and ended
(launchers/lifecycle/rank.py): meta.json's provenance, each rank's end record, and rank 0's summary with its
throughput, memory, efficiency (MFU) and energy of the measured window."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from benchmarks import distenv, runlog, telemetry
from benchmarks.loaders import sharding
from benchmarks.models.configs import AUTO
from benchmarks.rundir import cell_identity, run_files, summary_schema
from benchmarks.validate import data_classes, host_cpus, oversubscription, settings


def code_mixed(framework, code: dict) -> bool:
    """Whether the ranks ran different code (another checkout, sha or dirty state: runlog.code_provenance); every
    rank calls it at the same point (two scalar all-reduces)."""
    mine = runlog.code_fingerprint(code)
    return framework.all_reduce_scalar(mine, "min") != framework.all_reduce_scalar(mine, "max")


def classes_record(cfg: DictConfig, *, asked: int | str) -> dict:
    """meta.json's num_classes: the model's head, what the config asked (a number or auto) and the data
    set's class count with what was counted (null where nothing was: no data set, or one the loader does
    not read and auto did not count)."""
    counted = data_classes(cfg, strict=False) if asked == AUTO or cfg.loader.needs_data else None
    return {
        "model": cfg.model.num_classes,
        "asked": str(asked),
        "data": None if counted is None else counted[0],
        "counted": None if counted is None else counted[1],
    }


def peak_memory(device: torch.device, num_devices: int) -> dict[str, int]:
    """The rank's peak allocated and reserved bytes since it started (CUDA's caching allocator), the largest
    over the devices it drives; {} on a CPU."""
    if device.type != "cuda":
        return {}
    indexes = range(device.index, device.index + num_devices)
    return {
        "peak_allocated_bytes": max(torch.cuda.max_memory_allocated(i) for i in indexes),
        "peak_reserved_bytes": max(torch.cuda.max_memory_reserved(i) for i in indexes),
    }


def write_end(run_dir: Path, *, env: distenv.DistEnv, device: torch.device, error: BaseException | None = None) -> None:
    """end_rank<R>.json (summary_schema.end_record): the rank's peak device memory and, after a failure, its error
    (not writing it then, on a full disk or a broken CUDA context, never hides the run's own error)."""
    try:
        run_files.write_json_atomic(
            summary_schema.end_path(run_dir, env.rank),
            summary_schema.end_record(rank=env.rank, peaks=peak_memory(device, env.devices_per_rank), error=error),
        )
    except (OSError, RuntimeError):
        if error is None:
            raise


def write_provenance(
    cfg: DictConfig,
    run_dir: Path,
    *,
    env: distenv.DistEnv,
    framework,
    loader,
    task,
    classes: dict,
    cache_evict: dict | None = None,
    staged: dict | None = None,
    code: dict,
    mixed_code: bool,
) -> None:
    """config.yaml (resolved) and meta.json: what ran, where, with which versions (rank 0); `code`: rank 0's
    code_provenance, `code_mixed`: some rank ran other code (each rank's is in its log's header)."""
    OmegaConf.save(cfg, run_dir / run_files.CONFIG, resolve=True)
    run_files.write_json_atomic(
        run_dir / run_files.META,
        {
            "schema_version": run_files.SCHEMA_VERSION,
            "started": run_files.now_iso(),
            "argv": sys.argv,
            "launcher": env.source,
            "world_size": env.num_devices,
            "num_processes": env.world_size,
            "num_nodes": env.num_nodes,
            "git_sha": code["git_sha"],
            "git_dirty": code["git_dirty"],
            "code": code,
            "code_mixed": mixed_code,
            "versions": runlog.package_versions(),
            **runlog.container_provenance(),  # the image the ranks ran in (launchers/container.py)
            "hardware": runlog.hardware_provenance(),
            "env": runlog.environment_provenance(),
            "framework": framework.describe(),
            "loader": loader.describe(),
            "task": task.describe(),
            "num_classes": classes,
            **({"cache_evict": cache_evict} if cache_evict else {}),
            # data.stage=node_local: where rank 0's node read the data set from (config.yaml keeps data.path)
            **({"staging": staged} if staged is not None else {}),
            # more ranks on this host than CPUs; its launcher's CPUs: this rank may have bound itself to its share
            **oversubscription(ranks=env.local_world_size, cores=host_cpus(pid=os.getppid())),
            "cell_hash": cell_identity.cell_hash(settings(cfg), world_size=env.num_devices, num_nodes=env.num_nodes),
        },
    )


def note_short_last_step(num_samples: int | None, *, world_size: int, per_gpu_batch: int, steps_per_epoch: int) -> None:
    """Say when every epoch ends in a step much smaller than the batch: it takes nearly a whole step's
    time, so on a small dataset img/s reads low (4,100 images on 1 H200: one 4-image step in 16)."""
    last = (
        None
        if num_samples is None
        else sharding.short_last_step(num_samples, world_size=world_size, per_gpu_batch=per_gpu_batch)
    )
    if last is not None and last < per_gpu_batch // 2:
        print(
            f"[ddlbench] note: {num_samples} samples on {world_size} rank(s) at batch {per_gpu_batch}: each epoch's "
            f"last step (1 of {steps_per_epoch}) holds {last} sample(s) per rank and still costs nearly a whole step; "
            f"for throughput comparisons use a multiple of {world_size * per_gpu_batch} samples",
            file=sys.stderr,
            flush=True,
        )


def summary(
    cfg: DictConfig,
    run_dir: Path,
    *,
    env: distenv.DistEnv,
    warmup: int,
    wall_s: float,
    last_loss: float,
    runtime_s: float,
    sample_unit: str,
    target: dict | None = None,
) -> dict:
    """summary.json of a completed run: the throughput from the rank logs (summary_schema.throughput), as analysis has it."""
    key = cell_identity.identity(settings(cfg), world_size=env.num_devices, num_nodes=env.num_nodes)
    return summary_schema.completed_summary(
        key=key,
        measured=summary_schema.throughput_of_run(run_dir, world_size=env.num_devices, num_processes=env.world_size),
        num_processes=env.world_size,
        memory=summary_schema.memory_of_run(run_dir, num_processes=env.world_size),
        wall_s=wall_s,
        last_loss=last_loss,
        warmup_steps=warmup,
        repeat=cfg.run.repeat,
        runtime_s=runtime_s,
        target=target,
        names={
            "framework": cfg.framework.name,
            "loader": cfg.loader.name,
            "model": cell_identity.model_name_of(cfg.model),
            "precision": cfg.precision.name,
            "per_gpu_batch": cfg.run.per_gpu_batch,
            "campaign": cfg.run.campaign,
            "sample_unit": sample_unit,
        },
    )


def window_energy(framework, meter: telemetry.EnergyMeter | None, *, env: distenv.DistEnv) -> dict:
    """The measured window's energy summed over the ranks (every rank calls it: all-reduces): GPU joules where
    every rank read its counter, host joules where every host's reading rank read RAPL, and why not."""
    window = meter.result if meter is not None else telemetry.WindowEnergy(None, None, "not metered")
    gpu_all = framework.all_reduce_scalar(0.0 if window.gpu_j is None else 1.0, "min")
    gpu_j = framework.all_reduce_scalar(window.gpu_j or 0.0, "sum")
    reads_host = env.local_rank == 0
    host_missing = framework.all_reduce_scalar(1.0 if reads_host and window.host_j is None else 0.0, "max")
    host_j = framework.all_reduce_scalar(window.host_j or 0.0, "sum")
    note = window.note  # rank 0's: the ranks of a run are alike
    if env.num_devices != env.world_size:  # DataParallel: one process, several GPUs; the meter reads one
        gpu_all, note = 0.0, "GPU: a process drives several GPUs and reads one GPU's counter: not summed"
    return {
        "gpu_j": gpu_j if gpu_all >= 1.0 else None,
        "host_j": host_j if host_missing == 0.0 else None,
        "note": note,
        "window_start_t_s": window.start_t_s,
        "window_end_t_s": window.end_t_s,
    }


def efficiency(cfg: DictConfig, *, device: torch.device, task, per_gpu_samples_s: float | None) -> dict:
    """model_flops_per_sample (benchmarks/flops.py, on the meta device), the achieved TFLOPS per GPU and MFU
    against the GPU's peak for the run's math (benchmarks/peaks.py); rank 0, once, after the measured steps."""
    from benchmarks import flops, peaks

    counted = flops.model_flops_per_sample(OmegaConf.to_container(cfg.model, resolve=True), task)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    peak = peaks.run_peak(
        name, amp_dtype=cfg.precision.amp_dtype, tf32=peaks.torch_tf32(), conv_share=counted.conv_share
    )
    achieved, mfu = peaks.mfu(
        flops_per_sample=counted.flops, per_gpu_samples_s=per_gpu_samples_s, peak_tflops=peak.tflops
    )
    return {
        "model_flops_per_sample": counted.flops,
        "achieved_tflops_per_gpu": achieved,
        "peak_tflops": peak.tflops,
        "mfu": mfu,
        "mfu_note": peak.reason if counted.flops is not None else counted.reason,
    }


def target_text(target: dict) -> str:
    """One line on run.target_top1: reached after how long and how many samples, or not reached."""
    if not target["target_reached"]:
        return f"target top-1 {target['target_top1']:.2%} not reached"
    return (
        f"target top-1 {target['target_top1']:.2%} reached after {target['time_to_target_s']:.1f} s, "
        f"{target['samples_to_target']:,} samples, {target['steps_to_target']} steps"
    )
