"""One rank of a benchmark run: environment -> components -> loop -> run directory."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from benchmarks import affinity, components, distenv, runlog, telemetry
from benchmarks.data import coldcache
from benchmarks.errors import ConfigError
from benchmarks.loaders import sharding
from benchmarks.loaders.base import LoaderContext
from benchmarks.loop import LoopPlan, plan_steps, train
from benchmarks.models import model_name
from benchmarks.profiling import make_profiler
from benchmarks.validate import validate

REPO_DIR = Path(__file__).resolve().parent.parent


def resolve_run_dir(cfg: DictConfig, *, world_size: int, num_nodes: int) -> Path:
    """runs/<campaign>/<framework>-<loader>-<model>-g<W>-n<N>-b<B>-r<R>, or run.dir when given."""
    if cfg.run.dir:
        return Path(cfg.run.dir)
    name = runlog.run_dir_name(
        framework=cfg.framework.name, loader=cfg.loader.name,
        model=model_name(cfg.model.arch, cfg.model.depth), world_size=world_size, num_nodes=num_nodes,
        per_gpu_batch=cfg.run.per_gpu_batch, repeat=cfg.run.repeat,
    )
    return Path(cfg.run.root) / cfg.run.campaign / name


def _device(cfg: DictConfig, env: distenv.DistEnv) -> torch.device:
    if cfg.system.device == "cuda":
        # one GPU per rank: local rank i drives GPU i of its node
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def _write_provenance(cfg: DictConfig, run_dir: Path, *, env: distenv.DistEnv, framework, loader,
                      cache_evict: dict | None = None) -> None:
    """config.yaml (resolved) and meta.json: what ran, where, with which versions (rank 0)."""
    OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
    runlog.write_json_atomic(run_dir / "meta.json", {
        "schema_version": runlog.SCHEMA_VERSION, "started": runlog.now_iso(),
        "argv": sys.argv, "launcher": env.source, "world_size": env.world_size,
        "num_nodes": env.num_nodes, **runlog.git_provenance(REPO_DIR),
        "versions": runlog.package_versions(), "hardware": runlog.hardware_provenance(),
        "env": runlog.environment_provenance(), "framework": framework.describe(),
        "loader": loader.describe(), **({"cache_evict": cache_evict} if cache_evict else {}),
    })


def _note_short_last_step(num_samples: int | None, *, world_size: int, per_gpu_batch: int, steps_per_epoch: int) -> None:
    """Say when every epoch ends in a step much smaller than the batch: it takes nearly a whole step's
    time, so on a small dataset img/s reads low (4,100 images on 1 H200: one 4-image step in 16)."""
    last = None if num_samples is None else sharding.short_last_step(
        num_samples, world_size=world_size, per_gpu_batch=per_gpu_batch)
    if last is not None and last < per_gpu_batch // 2:
        print(f"[ddlbench] note: {num_samples} samples on {world_size} rank(s) at batch {per_gpu_batch}: each epoch's "
              f"last step (1 of {steps_per_epoch}) holds {last} sample(s) per rank and still costs nearly a whole step; "
              f"for throughput comparisons use a multiple of {world_size * per_gpu_batch} samples",
              file=sys.stderr, flush=True)


def _summary(cfg: DictConfig, *, env: distenv.DistEnv, warmup: int, measured_steps: int, samples: float,
             wall_s: float, last_loss: float) -> dict:
    """summary.json of a completed run: global samples over the slowest rank's measured window."""
    throughput = samples / wall_s
    return {
        "schema_version": runlog.SCHEMA_VERSION, "status": "completed", "finished": runlog.now_iso(),
        "framework": cfg.framework.name, "loader": cfg.loader.name,
        "model": model_name(cfg.model.arch, cfg.model.depth), "precision": cfg.precision.name,
        "world_size": env.world_size, "num_nodes": env.num_nodes,
        "per_gpu_batch": cfg.run.per_gpu_batch, "global_batch": cfg.run.per_gpu_batch * env.world_size,
        "warmup_steps": warmup, "measured_steps": measured_steps,
        "measured_samples": int(samples), "wall_s": wall_s,
        "throughput_img_s": throughput, "per_gpu_img_s": throughput / env.world_size,
        "last_loss": last_loss, "campaign": cfg.run.campaign, "repeat": cfg.run.repeat,
    }


def run(cfg: DictConfig) -> int:
    """Run this rank; rank 0 writes meta.json first and summary.json last. Returns the exit code."""
    env = distenv.from_environ()
    # first, before any thread starts (validate's CUDA probe, DALI, NCCL, loader workers): they inherit it
    cpus = affinity.bind(cfg.system.cpu_bind, local_rank=env.local_rank, local_world_size=env.local_world_size,
                         launched_by=env.source)
    validate(cfg)
    coldcache.check(cfg.data.cache, cfg.data.cache_evict)
    run_dir = resolve_run_dir(cfg, world_size=env.world_size, num_nodes=env.num_nodes)
    if env.rank == 0 and runlog.holds_a_run(run_dir):
        raise ConfigError(f"run directory {run_dir} already holds a run; pass run.repeat={cfg.run.repeat + 1} or another run.campaign")
    if cfg.system.device == "cpu":
        torch.set_num_threads(max(1, int(cfg.system.cpus_per_rank)))
    device = _device(cfg, env)
    framework = components.build_framework(cfg)
    loader_option = components.build_loader(cfg)
    framework.init(env, device)
    log = profiler = sampler = None
    try:
        if env.rank == 0:
            run_dir.mkdir(parents=True, exist_ok=True)
        # data.cache=cold: local rank 0 of each node evicts data.path; the barrier keeps every rank from reading first
        cache_evict = coldcache.prepare(cfg.data, needs_data=cfg.loader.needs_data, local_rank=env.local_rank)
        framework.barrier()  # the directory exists before any rank opens its log
        log = runlog.RankLog(run_dir, env.rank)
        loader = loader_option.build(LoaderContext(
            rank=env.rank, world_size=env.world_size, device=device, per_gpu_batch=cfg.run.per_gpu_batch,
            seed=cfg.run.seed, num_classes=cfg.model.num_classes, image_size=cfg.model.image_size,
            channels_last=cfg.precision.channels_last, data_path=cfg.data.path,
        ))
        model, optimizer = components.build_model_and_optimizer(cfg, device)
        amp_dtype = components.amp_dtype(cfg)
        model, optimizer = framework.setup(model, optimizer, amp_dtype=amp_dtype)
        if cfg.model.compile:
            model = torch.compile(model)
        warmup, measured = plan_steps(
            warmup_steps=cfg.run.warmup_steps, steps=cfg.run.steps, epochs=cfg.run.epochs, steps_per_epoch=len(loader)
        )
        log.write({"kind": "header", "schema_version": runlog.SCHEMA_VERSION, "rank": env.rank,
                   "local_rank": env.local_rank, "host": socket.gethostname(), "device": str(device),
                   "pid": os.getpid(), "cpus": affinity.compact(cpus), "steps_per_epoch": len(loader)})
        if env.rank == 0:
            _write_provenance(cfg, run_dir, env=env, framework=framework, loader=loader, cache_evict=cache_evict)
            _note_short_last_step(getattr(loader, "num_samples", None), world_size=env.world_size,
                                  per_gpu_batch=cfg.run.per_gpu_batch, steps_per_epoch=len(loader))
            print(f"[ddlbench] rank 0/{env.world_size} on {device}: {run_dir}", file=sys.stderr, flush=True)
        profiler = make_profiler(cfg.run.profile_steps, total_steps=warmup + measured, run_dir=run_dir,
                                 rank=env.rank, device=device)
        if cfg.run.telemetry_hz > 0:
            sampler = telemetry.start_sampler(run_dir, rank=env.rank, hz=cfg.run.telemetry_hz,
                                              gpu=telemetry.gpu_identity(device))
        if profiler is not None:
            profiler.start()
        result = train(
            framework=framework, model=model, loader=loader, device=device, log=log, profiler=profiler,
            plan=LoopPlan(warmup_steps=warmup, measured_steps=measured, log_every=cfg.run.log_every, amp_dtype=amp_dtype),
        )
        # the slowest rank defines the measured window; samples add up over ranks
        wall_s = framework.all_reduce_scalar(result.wall_s_local, "max")
        samples = framework.all_reduce_scalar(float(result.measured_samples_local), "sum")
        if cfg.run.save_params:
            torch.save(framework.host_state_dict(model), run_dir / f"params_rank{env.rank}.pt")
        framework.barrier()  # every rank finished its steps and logs before the summary says so
        if env.rank == 0:
            summary = _summary(cfg, env=env, warmup=warmup, measured_steps=result.measured_steps,
                               samples=samples, wall_s=wall_s, last_loss=result.last_loss)
            runlog.write_json_atomic(run_dir / runlog.SUMMARY, summary)
            print(f"[ddlbench] done: {summary['throughput_img_s']:,.1f} img/s over {env.world_size} rank(s) "
                  f"({summary['per_gpu_img_s']:,.1f} per rank) -> {run_dir}", flush=True)
        return 0
    except BaseException as error:
        if env.rank == 0 and run_dir.is_dir() and not (run_dir / runlog.SUMMARY).exists():
            runlog.write_json_atomic(run_dir / runlog.SUMMARY, {
                "schema_version": runlog.SCHEMA_VERSION, "status": "failed", "finished": runlog.now_iso(),
                "error": f"{type(error).__name__}: {error}",
            })
        raise
    finally:
        if profiler is not None:
            profiler.stop()
        if sampler is not None:
            sampler.stop()
        if log is not None:
            log.close()
        # the wrapped model (DDP's reducer, a DeepSpeed engine) holds the process group: it goes first
        model = optimizer = loader = None  # noqa: F841
        framework.shutdown()
