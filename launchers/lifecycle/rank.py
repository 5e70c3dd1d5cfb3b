"""One rank of a benchmark run, end to end: its place (the launcher's variables), its data staged, the engine's
adapters built (benchmarks/adapters.py), the hang watchdog and the interference observer around the engine's loop
(benchmarks/loop.py), what it measured written (benchmarks/measurement.py), its failure recorded."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import sys
import time
import traceback
from pathlib import Path

import psutil
import torch
from omegaconf import DictConfig

from benchmarks import adapters, affinity, distenv, loop, measurement, mllog, runlog, telemetry
from benchmarks.data import coldcache
from benchmarks.errors import ConfigError
from benchmarks.evaluate import Validation
from benchmarks.frameworks.configs import node_layout
from benchmarks.loop import LoopPlan, first_nonfinite_step, phase_of, plan_steps, train
from benchmarks.mllog import MlLog
from benchmarks.models.configs import AUTO, RATE_LABELS
from benchmarks.optim import LrSchedule
from benchmarks.profiling import make_profiler, plan_window, reduce_trace, remove_trace_dir
from benchmarks.rundir import run_files, summary_schema
from benchmarks.schema import staging_enabled
from benchmarks.validate import (
    resolve_run_dir,
    validate,
)
from launchers.lifecycle import interference, rundir_state, staging, watchdog


def _announce(
    cfg: DictConfig,
    run_dir: Path,
    *,
    env: distenv.DistEnv,
    device: torch.device,
    framework,
    loader,
    task,
    asked_classes: int | str,
    cache_evict,
    staged: staging.NodeStaging | None,
    code: dict,
    mixed_code: bool,
) -> None:
    """Rank 0, once everything is built: meta.json (what ran, with what), then the start lines on stderr (an
    auto class count, a short last step, where the run writes)."""
    classes = measurement.classes_record(cfg, asked=asked_classes)
    measurement.write_provenance(
        cfg,
        run_dir,
        env=env,
        framework=framework,
        loader=loader,
        task=task,
        classes=classes,
        cache_evict=cache_evict,
        staged=dataclasses.asdict(staged) if staged is not None else None,
        code=code,
        mixed_code=mixed_code,
    )
    if mixed_code:
        print(
            f"[ddlbench] the ranks ran different code (rank 0: {code['package']} at {code['git_sha']}); "
            "each rank's is its rank<R>.jsonl header's `code`: run every rank from one checkout",
            file=sys.stderr,
            flush=True,
        )
    if asked_classes == AUTO and classes["data"] is not None:
        print(
            f"[ddlbench] model.num_classes=auto: {classes['model']} ({classes['counted']})", file=sys.stderr, flush=True
        )
    measurement.note_short_last_step(
        loader.num_samples,
        world_size=env.world_size,
        per_gpu_batch=cfg.run.per_gpu_batch * env.devices_per_rank,
        steps_per_epoch=len(loader),
    )
    print(f"[ddlbench] rank 0/{env.world_size} on {device}: {run_dir}", file=sys.stderr, flush=True)


def _say_done(
    summary: dict, run_dir: Path, *, env: distenv.DistEnv, device: torch.device, sample_unit: str, target: dict
) -> None:
    """Rank 0's last lines: the run's throughput, and whether it reached its target."""
    unit, rate = "GPU" if device.type == "cuda" else "rank", RATE_LABELS[sample_unit]
    print(
        f"[ddlbench] done: {summary['throughput_img_s']:,.1f} {rate} over {env.num_devices} {unit}(s) "
        f"({summary['per_gpu_img_s']:,.1f} per {unit}) -> {run_dir}",
        flush=True,
    )
    if target:
        print(f"[ddlbench] {measurement.target_text(target)}", flush=True)
    if summary.get("nonfinite_loss_step") is not None:
        print(
            f"[ddlbench] warning: the loss went non-finite at step {summary['nonfinite_loss_step']} "
            f"({summary['nonfinite_loss_phase']} phase): the training diverged, its throughput stands; "
            "run.stop_on_nan=true ends such a run there (docs/models.md)",
            file=sys.stderr,
            flush=True,
        )


@dataclasses.dataclass
class _Opened:
    """What a rank opens while it runs, each closed at its end whatever happened (None: not opened)."""

    log: runlog.RankLog | None = None
    profiler: object | None = None
    sampler: object | None = None
    events: MlLog | None = None
    watchdog: watchdog.Watchdog | None = None
    meter: telemetry.EnergyMeter | None = None
    observer: interference.Observer | None = None  # the host's local rank 0 only

    def close(self) -> None:
        """Each opened thing ended, in this order: the window's observers first, the logs last."""
        ends = (self.observer, "stop"), (self.meter, "close"), (self.watchdog, "stop"), (self.profiler, "stop")
        for thing, end in (*ends, (self.sampler, "stop"), (self.log, "close"), (self.events, "close")):
            if thing is not None:
                getattr(thing, end)()


def _place(cfg: DictConfig) -> tuple[distenv.DistEnv, list[int], int | str, Path]:
    """The rank's place (env), the CPUs it is bound to, the class count asked for and the run directory; the
    config validated and a directory that holds a run refused, before anything is built."""
    # world_size counts processes; a single-process framework (DataParallel) drives several devices each
    env = dataclasses.replace(distenv.from_environ(), devices_per_rank=node_layout(cfg)[1])
    # first, before any thread starts (validate's CUDA probe, DALI, NCCL, loader workers): they inherit it
    cpus = affinity.bind(
        cfg.system.cpu_bind, local_rank=env.local_rank, local_world_size=env.local_world_size, launched_by=env.source
    )
    asked_classes = cfg.model.num_classes  # validate() writes auto's number in its place
    validate(cfg)
    coldcache.check(cfg.data.cache, cfg.data.cache_evict)
    run_dir = resolve_run_dir(cfg, world_size=env.num_devices, num_nodes=env.num_nodes)
    if env.rank == 0 and rundir_state.holds_a_run(run_dir):
        raise ConfigError(
            f"run directory {run_dir} already holds a run; pass run.repeat={cfg.run.repeat + 1} or another run.campaign"
        )
    if cfg.system.device == "cpu":
        torch.set_num_threads(max(1, int(cfg.system.cpus_per_rank)))
    return env, cpus, asked_classes, run_dir


def _stage(cfg: DictConfig, run_dir: Path, *, env: distenv.DistEnv, framework, events: MlLog | None):
    """data.stage=node_local: each node's copy of the data set (launchers/lifecycle/staging.py; every rank waits for
    every node's), logged as MLPerf HPC logs it (staging_start / staging_stop, inside init); None otherwise."""
    if not staging_enabled(cfg.data):
        return None
    if events is not None:
        events.start("staging_start")
    staged = staging.stage(
        staging.staged_sources(cfg),
        local_scratch=cfg.system.local_scratch,
        run_dir=run_dir,
        rank=env.rank,
        local_rank=env.local_rank,
        reduce=framework.all_reduce_scalar,
    )
    if events is not None:
        events.end("staging_stop", staging_bytes=staged.staged_bytes, num_files=staged.num_files)
    if env.rank == 0:
        print(
            f"[ddlbench] data staged to {staged.root} on each node; rank 0's node: {staged.staged_bytes / staging.GB:.3f} "
            f"GB in {staged.staging_s:.2f} s ({staged.gb_s:.2f} GB/s; summary.json has the slowest node's)",
            file=sys.stderr,
            flush=True,
        )
    return staged


def _unstage(cfg: DictConfig, run_dir: Path, *, env: distenv.DistEnv) -> None:
    """The rank leaves its node's staged copy when the run ends, whatever happened; the last reader deletes it
    (docs/staging.md)."""
    if staging_enabled(cfg.data):
        with contextlib.suppress(staging.StagingError, ConfigError, OSError):
            staging.release(
                staging.scratch_root(cfg.system.local_scratch),
                staging.run_name(run_dir),
                rank=env.rank,
                local_rank=env.local_rank,
            )


def _conclude(
    cfg: DictConfig,
    run_dir: Path,
    *,
    env: distenv.DistEnv,
    device: torch.device,
    framework,
    task,
    model,
    result,
    window,
    validation: Validation | None,
    warmup: int,
    plan: LoopPlan,
    opened: _Opened,
    started_s: float | None,
    startup_local_s: float,
) -> None:
    """After the last step: the trace window reduced, the end records, and rank 0's summary once every rank
    is done."""
    # from the process start (imports, process group, builds, warm-up; a run in a longer-lived process,
    # run_here's: from its call) to the last step, without the trace export (the ranks' own work, not the run's)
    began_s = psutil.Process().create_time() if started_s is None else started_s
    runtime_local_s = time.time() - began_s - (opened.profiler.export_s if opened.profiler else 0.0)
    if window is not None and result.stopped_at_target:
        # the window's steps come after the measured ones, which the target cut short: nothing was traced
        if env.rank == 0:
            print("[ddlbench] the run stopped at its target before the trace window: no trace breakdown",
                  file=sys.stderr, flush=True)  # fmt: skip
    elif window is not None:
        reduce_trace(window, run_dir=run_dir, rank=env.rank)
    # the slowest rank's wall time of the measured window (for reference: throughput comes from the logs)
    wall_s = framework.all_reduce_scalar(result.wall_s_local, "max")
    runtime_s = framework.all_reduce_scalar(runtime_local_s, "max")
    startup_s = framework.all_reduce_scalar(startup_local_s, "max")
    nonfinite_step = first_nonfinite_step(framework, result.nonfinite_step)
    energy = measurement.window_energy(framework, opened.meter, env=env)
    target = validation.target_fields() if validation is not None else {}
    if opened.events is not None:
        opened.events.run_stop(status="aborted" if target and not target["target_reached"] else "success")
    if cfg.run.save_params:
        torch.save(framework.host_state_dict(model), run_dir / f"params_rank{env.rank}.pt")
    measurement.write_end(run_dir, env=env, device=device)
    if opened.observer is not None:  # the host's verdicts over its measured window, before rank 0 reads them
        window_t = opened.meter.result if opened.meter is not None else telemetry.WindowEnergy(None, None, "")
        opened.observer.finish(run_dir, rank=env.rank, start_t_s=window_t.start_t_s, end_t_s=window_t.end_t_s)
    opened.log.close()  # closed, not only flushed: a shared file system shows rank 0 every line after the barrier
    framework.barrier()  # every rank finished its steps and logs before the summary says so
    if env.rank != 0:
        return
    if window is not None and not window.keep_trace:
        remove_trace_dir(run_dir)
    summary = measurement.summary(
        cfg,
        run_dir,
        env=env,
        warmup=warmup,
        wall_s=wall_s,
        last_loss=result.last_loss,
        runtime_s=runtime_s,
        sample_unit=task.sample_unit,
        target=target,
    )
    summary |= measurement.efficiency(cfg, device=device, task=task, per_gpu_samples_s=summary.get("per_gpu_img_s"))
    summary |= summary_schema.energy_fields(energy, measured_samples=summary.get("measured_samples"), wall_s=wall_s)
    summary |= {"window_start_t_s": energy["window_start_t_s"], "window_end_t_s": energy["window_end_t_s"]}
    summary["startup_s"] = startup_s  # data.stage=node_local: the copy is inside it, as in the time to train
    if staging_enabled(cfg.data):
        summary |= staging.summary_fields(staging.read_records(run_dir))
    summary |= interference.summary_fields(run_dir)  # shared host, GPU shared, throttled: with their evidence
    if nonfinite_step is not None:
        summary |= {"nonfinite_loss_step": nonfinite_step, "nonfinite_loss_phase": phase_of(nonfinite_step, plan)}
    run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary)
    _say_done(summary, run_dir, env=env, device=device, sample_unit=task.sample_unit, target=target)


def _record_failure(error: BaseException, run_dir: Path, *, env: distenv.DistEnv, device, opened: _Opened) -> None:
    """What a rank that stopped leaves: MLLOG's run_stop, its end record (why: maxbatch reads out_of_memory)
    and, on rank 0, the failed or interrupted summary."""
    if opened.events is not None and opened.events.run_start_s is not None:
        with contextlib.suppress(OSError, ValueError):
            opened.events.run_stop(status="aborted")
    if opened.log is not None:
        measurement.write_end(run_dir, env=env, device=device, error=error)
    if env.rank == 0 and run_dir.is_dir() and not (run_dir / run_files.SUMMARY).exists():
        # KeyboardInterrupt: Ctrl-C, or SIGTERM (benchmarks/__main__.py raises it for that too)
        run_files.write_json_atomic(
            run_dir / run_files.SUMMARY,
            summary_schema.interrupted_summary(str(error) or "SIGINT")
            if isinstance(error, KeyboardInterrupt)
            else summary_schema.failed_summary(error),
        )


def run(cfg: DictConfig, *, started_s: float | None = None) -> int:
    """Run this rank; rank 0 writes meta.json first and summary.json last. Returns the exit code.
    started_s: when the run began (time.time()), for its runtime; None: when this process started."""
    env, cpus, asked_classes, run_dir = _place(cfg)
    device = adapters.device_of(cfg, env)
    hang_limits = watchdog.limits_of(cfg.run.hang_timeout_s, device_type=device.type)
    if device.type == "cuda":
        watchdog.set_up_flight_recorder(run_dir)  # before NCCL's process group starts: it reads them then
    framework = adapters.build_framework(cfg)
    loader_option = adapters.build_loader(cfg)
    task = adapters.build_task(cfg)
    framework.init(env, device)
    opened = _Opened()
    model = optimizer = loader = None
    try:
        if env.rank == 0:
            run_dir.mkdir(parents=True, exist_ok=True)
        # data.cache=cold: local rank 0 of each node evicts data.path; the barrier keeps every rank from reading first
        cache_evict = coldcache.prepare(cfg.data, needs_data=cfg.loader.needs_data, local_rank=env.local_rank)
        framework.barrier()  # the directory exists before any rank opens its log
        if env.rank == 0:
            opened.events = MlLog(run_dir)
            opened.events.start("init_start")
        staged = _stage(cfg, run_dir, env=env, framework=framework, events=opened.events)
        opened.log = runlog.RankLog(run_dir, env.rank)
        if hang_limits is not None:
            opened.watchdog = watchdog.Watchdog(run_dir, rank=env.rank, limits=hang_limits).start()
        read_from = staged.paths if staged is not None else {}
        loader, val_loader = adapters.build_loaders(
            cfg, loader_option, env=env, device=device, task=task, read_from=read_from
        )
        global_batch = cfg.run.per_gpu_batch * env.num_devices
        model, optimizer = adapters.build_model_and_optimizer(cfg, device, global_batch=global_batch)
        amp_dtype = adapters.amp_dtype(cfg)
        model, optimizer = framework.setup(model, optimizer, amp_dtype=amp_dtype)
        if cfg.model.compile:
            model = torch.compile(model, mode=cfg.model.compile_mode.torch_mode)
        if opened.events is not None:
            mllog.settings_events(
                opened.events,
                cfg=cfg,
                global_batch=global_batch,
                train_samples=loader.num_samples,
                eval_samples=None if val_loader is None else val_loader.num_samples,
            )
        steps_per_epoch = len(loader)
        warmup, measured = plan_steps(
            warmup_steps=cfg.run.warmup_steps,
            steps=cfg.run.steps,
            epochs=cfg.run.epochs,
            steps_per_epoch=steps_per_epoch,
        )
        code = runlog.code_provenance()
        opened.log.write(runlog.header(env, device, cpus=cpus, steps_per_epoch=steps_per_epoch, code=code))
        mixed_code = measurement.code_mixed(framework, code)
        if env.rank == 0:
            _announce(
                cfg,
                run_dir,
                env=env,
                device=device,
                framework=framework,
                loader=loader,
                task=task,
                asked_classes=asked_classes,
                cache_evict=cache_evict,
                staged=staged,
                code=code,
                mixed_code=mixed_code,
            )
        window = plan_window(cfg.run, device_type=device.type, warmup=warmup, measured=measured)
        opened.profiler = make_profiler(window, run_dir=run_dir, rank=env.rank, device=device)
        if cfg.run.telemetry_hz > 0:
            gpu = telemetry.gpu_identity(device)
            opened.sampler = telemetry.start_sampler(run_dir, rank=env.rank, hz=cfg.run.telemetry_hz, gpu=gpu)
        validation = None
        if val_loader is not None:
            validation = Validation(
                model,
                val_loader,
                device=device,
                amp_dtype=amp_dtype,
                reduce=framework.all_reduce_scalar,
                run_dir=run_dir,
                rank=env.rank,
                steps_per_epoch=steps_per_epoch,
                target_top1=cfg.run.target_top1,
                events=opened.events,
            )
        if opened.profiler is not None:
            opened.profiler.start()
        plan = loop.plan_of(
            cfg, warmup=warmup, measured=measured, window=window, amp_dtype=amp_dtype, steps_per_epoch=steps_per_epoch
        )
        opened.meter = telemetry.energy_meter(device, host=env.local_rank == 0)
        if env.local_rank == 0:  # what else runs on the host and its GPUs meanwhile (interference.py)
            opened.observer = interference.start(
                run_dir, rank=env.rank, local_world_size=env.local_world_size, device=device
            )
        began_s = psutil.Process().create_time() if started_s is None else started_s
        startup_local_s = time.time() - began_s  # to the first training step: train() starts it
        result = train(
            meter=opened.meter,
            framework=framework,
            model=model,
            loader=loader,
            device=device,
            log=opened.log,
            task=task,
            profiler=opened.profiler,
            plan=plan,
            evaluation=validation if opened.watchdog is None else opened.watchdog.around(validation),
            events=opened.events,
            watchdog=opened.watchdog,
            optimizer=optimizer,
            lr_schedule=LrSchedule(
                cfg.optim,
                global_batch=global_batch,
                total_steps=warmup + measured,  # the trace window's steps after them do not stretch the schedule
                steps_per_epoch=steps_per_epoch,
            ),
        )
        if opened.watchdog is not None:
            opened.watchdog.enter("conclude")
        _conclude(
            cfg,
            run_dir,
            env=env,
            device=device,
            framework=framework,
            task=task,
            model=model,
            result=result,
            window=window,
            validation=validation,
            warmup=warmup,
            plan=plan,
            opened=opened,
            started_s=started_s,
            startup_local_s=startup_local_s,
        )
        return 0
    except BaseException as error:
        _record_failure(error, run_dir, env=env, device=device, opened=opened)
        raise
    finally:
        opened.close()
        _unstage(cfg, run_dir, env=env)
        # the wrapped model (DDP's reducer, a DeepSpeed engine) holds the process group: it goes first
        model = optimizer = loader = None  # noqa: F841
        framework.shutdown()


def run_here(cfg: DictConfig) -> int:
    """A world of one, run in this process: `ddlbench maxbatch`'s probes, one after another in one process
    (no Python, torch and CUDA start per probe). Returns run()'s exit code, or 1 where it raised anything but
    a ConfigError: the traceback goes to stderr and the run directory says why it stopped (an out of memory:
    summary_schema.ran_out_of_memory). Afterwards the memory the run held goes back to the device and the peak
    counters start anew, so the next run's peak is its own."""
    try:
        return run(cfg, started_s=time.time())
    except ConfigError:
        raise
    except Exception:  # the exception and its frames (the failed step's activations) are dropped here
        traceback.print_exc()
        return 1
    finally:
        gc.collect()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
