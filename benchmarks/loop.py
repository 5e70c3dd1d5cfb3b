"""ONE timed training loop for every framework x loader x task.

Warm-up steps are run and logged but not measured; the measured window is timed on the host between
two device synchronisations, and the slowest rank defines it. Per-step phase times come from the
step timer (CUDA events or perf_counter) and go to rank<R>.jsonl, with two host times: host_data_s
(the host blocked in the loader's next()) and host_step_s (the host queueing the whole step). On a GPU,
a large host_data_s is a loader that fell behind, whether or not queued work hid it from data_s.
What a batch is, its loss and its sample count are the task's (benchmarks/tasks/).
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from omegaconf import DictConfig

from benchmarks.frameworks.base import Framework
from benchmarks.loaders.base import EpochLoader
from benchmarks.mllog import MlLog
from benchmarks.models.configs import RATE_LABELS
from benchmarks.optim import LrSchedule
from benchmarks.profiling import StepProfiler
from benchmarks.runlog import RankLog
from benchmarks.tasks.base import Task
from benchmarks.telemetry import EnergyMeter
from benchmarks.timing import make_step_timer, synchronize


class PhaseWatch(Protocol):
    """What the loop tells a hang watchdog (launchers/lifecycle/watchdog.py Watchdog): the step timer it wraps,
    so that each phase it marks is seen from outside the loop."""

    def watch(self, timer: Any) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopPlan:
    warmup_steps: int
    measured_steps: int  # steps after warm-up
    log_every: int
    amp_dtype: torch.dtype | None
    trailing_steps: int = 0  # steps after the measured ones, not timed as the window (the trace window)
    eval_every: int = 0  # evaluate every N steps (run.eval_every_steps); the evaluation is in no step
    eval_every_epochs: int = 0  # or after every N-th epoch's last step (run.eval_every_epochs)
    steps_per_epoch: int = 0  # the loader's batches per epoch (len(loader)): where an epoch ends
    stop_on_nan: bool = False  # run.stop_on_nan: end the run at the first non-finite loss on any rank


def phase_of(step: int, plan: LoopPlan) -> str:
    """The part of the run a step belongs to: warm-up, measured, or the trace window after the measured steps."""
    if step < plan.warmup_steps:
        return "warm-up"
    return "measured" if step < plan.warmup_steps + plan.measured_steps else "trace window"


class NonFiniteLoss(RuntimeError):
    """The loss went NaN or infinite and run.stop_on_nan asked the run to end there."""

    def __init__(self, step: int, plan: LoopPlan) -> None:
        super().__init__(
            f"the loss went non-finite at step {step} ({phase_of(step, plan)} phase) and run.stop_on_nan=true "
            "ended the run; see docs/models.md for what keeps mixed precision stable"
        )
        self.step = step


class LossReader:
    """Each step's loss, read without making the host wait: on a GPU it is copied into a page-locked slot
    right after the forward (asynchronously) and read when the step's times are, by which time its end
    event has completed and the copy with it. A step's record waits at most the timer's lag (2 steps)."""

    SLOTS = 16  # more than the steps a record can wait (CudaStepTimer's lag + 1)

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._slots = torch.zeros(self.SLOTS, dtype=torch.float32, pin_memory=self.cuda)
        self._cpu: dict[int, float] = {}

    def keep(self, step: int, loss: torch.Tensor) -> None:
        if self.cuda:
            self._slots[step % self.SLOTS].copy_(loss.detach().float(), non_blocking=True)
        else:
            self._cpu[step] = float(loss.detach())

    def read(self, step: int) -> float:
        return float(self._slots[step % self.SLOTS]) if self.cuda else self._cpu.pop(step)


@dataclass(slots=True, kw_only=True)
class LoopResult:
    measured_steps: int
    measured_samples_local: int
    wall_s_local: float
    last_loss: float
    stopped_at_target: bool = False  # an evaluation reached run.target_top1 and the run stopped there
    nonfinite_step: int | None = None  # this rank's first step whose loss was NaN or infinite


# the loop's evaluation: (optimizer steps done, epoch, this rank's training samples so far, the
# perf_counter of the first training step) -> True when the run should stop (its target is reached)
Evaluation = Callable[[int, int, int, float], bool]


def evaluates_after(step: int, step_in_epoch: int, epoch: int, plan: LoopPlan) -> bool:
    """Whether the loop evaluates after `step` optimizer steps (step_in_epoch of them in this epoch):
    every plan.eval_every steps, or after every plan.eval_every_epochs-th epoch's last step."""
    if plan.eval_every:
        return step % plan.eval_every == 0
    return (
        bool(plan.eval_every_epochs)
        and step_in_epoch == plan.steps_per_epoch
        and (epoch + 1) % plan.eval_every_epochs == 0
    )


def plan_steps(*, warmup_steps: int, steps: int, epochs: int | None, steps_per_epoch: int) -> tuple[int, int]:
    """(warm-up, measured) step counts: `epochs` full epochs when set, else warm-up + `steps`."""
    if epochs is None:
        return warmup_steps, steps
    total = epochs * steps_per_epoch
    return min(warmup_steps, total - 1), total - min(warmup_steps, total - 1)


def eta_text(seconds: float) -> str:
    """Seconds as 42s, 3m05s or 2h03m."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _progress(step: int, total: int, epoch: int, records: list[dict], samples: int, world: int, rate: str) -> None:
    step_s = sum(r["step_s"] for r in records) / len(records)
    data_share = sum(r["data_s"] for r in records) / max(1e-12, sum(r["step_s"] for r in records))
    print(
        f"[ddlbench] step {step}/{total} epoch {epoch} | {samples * world / step_s:,.0f} {rate} "
        f"(~{samples / step_s:,.0f} per rank) | step {step_s * 1e3:.1f} ms | data {data_share:.0%} | "
        f"ETA {eta_text((total - step) * step_s)}",
        file=sys.stderr,
        flush=True,
    )


class _Records:
    """Each step's record on its way to the rank log: it waits for its device times (the step timer hands
    them back only once the step's events completed, in step order), then takes its loss (LossReader) and,
    with a comm timer that reads its events late, its collective times; rank 0 prints the progress line
    every log_every steps."""

    def __init__(
        self,
        log: RankLog,
        losses: LossReader,
        comm_timer,
        *,
        progress_every: int,
        total: int,
        world_size: int,
        rate: str,
        rank: int,
    ) -> None:
        self.log, self.losses, self.comm_timer = log, losses, comm_timer
        # a comm timer that reads its events late is asked when the step's own times are read
        self.comm_late = comm_timer is not None and comm_timer.reads_late
        self.progress_every = progress_every if rank == 0 else 0
        self.total, self.world_size, self.rate = total, world_size, rate
        self.pending: deque[dict] = deque()
        self.recent: list[dict] = []
        self.nonfinite_step: int | None = None  # the first step whose loss was NaN or infinite

    def add(self, record: dict) -> None:
        if self.comm_timer is not None and not self.comm_late:
            record["comm_s"], record["comm_exposed_s"] = self.comm_timer.step_comm_s()
        self.pending.append(record)

    def write(self, ready_times: list[dict]) -> None:
        """The oldest waiting records, one per step's times now read, to the log."""
        for times in ready_times:
            record = self.pending.popleft()
            record.update(times)
            record["loss"] = self.losses.read(record["step"])
            if self.nonfinite_step is None and not math.isfinite(record["loss"]):
                self.nonfinite_step = record["step"]
            if self.comm_late:
                record["comm_s"], record["comm_exposed_s"] = self.comm_timer.step_comm_s()
            self.log.write(record)
            self.recent.append(record)
        if self.progress_every and len(self.recent) >= self.progress_every:
            last = self.recent[-1]
            _progress(
                last["step"] + 1, self.total, last["epoch"], self.recent, last["samples"], self.world_size, self.rate
            )
            self.recent = []


def _one_step(batches, *, step: int, model, task: Task, framework: Framework, timer, losses: LossReader, autocast):
    """One training step, its phases marked on the step timer: (batch, loss, host_data_s, host_step_s), or None
    when the epoch has no batch left. host_data_s: the host blocked in the loader; host_step_s: the host
    queueing the whole step."""
    timer.start_step()
    t_host = time.perf_counter()
    try:
        # the previous step's work is all queued by now: DALI's zero-copy batches are released
        # behind an event recorded here (loaders/dali.py)
        batch = next(batches)
    except StopIteration:
        timer.cancel_step()
        return None
    t_host_data = time.perf_counter()
    timer.mark()
    with autocast():
        loss = task.loss(model, batch)
    losses.keep(step, loss)
    timer.mark()
    framework.backward(loss)
    timer.mark()
    framework.step()
    timer.mark()
    timer.end_step()
    return batch, loss, t_host_data - t_host, time.perf_counter() - t_host


_NONE = 1e18  # no non-finite loss on this rank: larger than any step


def first_nonfinite_step(framework: Framework, step: int | None) -> int | None:
    """The first step whose loss was not finite on any rank (a collective: every rank calls it), or None."""
    first = framework.all_reduce_scalar(_NONE if step is None else float(step), "min")
    return None if first >= _NONE else int(first)


def _stop_on_nan(framework: Framework, step: int | None, plan: LoopPlan) -> None:
    """run.stop_on_nan: every rank asks, each step, whether any rank's loss went non-finite (one scalar
    all-reduce a step: a sync, which is why benchmarks leave it off); the losses are read as their steps'
    times are (up to two steps late on a GPU), so the run ends within two steps of the first bad loss."""
    if (first := first_nonfinite_step(framework, step)) is not None:
        raise NonFiniteLoss(first, plan)


def train(
    *,
    framework: Framework,
    model: torch.nn.Module,
    loader: EpochLoader,
    device: torch.device,
    plan: LoopPlan,
    log: RankLog,
    task: Task,
    profiler: StepProfiler | None = None,
    optimizer=None,
    lr_schedule: LrSchedule | None = None,
    evaluation: Evaluation | None = None,
    events: MlLog | None = None,
    watchdog: PhaseWatch | None = None,
    meter: EnergyMeter | None = None,
) -> LoopResult:
    """Run the plan's steps; every step's record goes to the rank log once its times are read (the loss
    with it: LossReader). lr_schedule sets optimizer's learning rate before each step; evaluation runs
    where evaluates_after() says and after the last step, between steps, its time taken out of the
    measured wall time; when it returns True after the warm-up, the run stops there (run.target_top1).
    events (rank 0): the MLLOG run_start and epoch_start / epoch_stop. task: what a batch is, its loss and
    its samples (benchmarks/tasks/). meter: start() and stop() at the measured window's ends, each rank's
    device idle (telemetry.EnergyMeter)."""
    losses = LossReader(device)
    timer = make_step_timer(device)
    if watchdog is not None:  # told each step's phases as the timer marks them (run.hang_timeout_s)
        timer = watchdog.watch(timer)
    autocast = (
        (lambda: torch.autocast(device_type=device.type, dtype=plan.amp_dtype))
        if plan.amp_dtype is not None
        else contextlib.nullcontext
    )
    measured_end = plan.warmup_steps + plan.measured_steps
    total = measured_end + plan.trailing_steps
    records = _Records(
        log,
        losses,
        framework.comm_timer(),
        progress_every=plan.log_every,
        total=total,
        world_size=framework.world_size,
        rate=RATE_LABELS[task.sample_unit],
        rank=framework.rank,
    )
    wall_s = None
    step = epoch = 0
    measured_samples = samples_done = 0
    stop = False
    t_start = t_run = time.perf_counter()
    if events is not None:
        events.run_start()
    loss = torch.zeros(())
    model.train()
    while step < total and not stop:
        loader.set_epoch(epoch)
        batches = iter(loader)
        step_in_epoch = 0
        if events is not None:
            events.start("epoch_start", epoch_num=epoch + 1)
        while step < total:
            if step == plan.warmup_steps:
                # the measured window starts with an idle device on every rank
                synchronize(device)
                framework.barrier()
                t_start = time.perf_counter()
                if meter is not None:
                    meter.start()
            if step == measured_end and wall_s is None:  # the steps after it (a trace window) are not in its wall time
                synchronize(device)
                wall_s = time.perf_counter() - t_start
                if meter is not None:
                    meter.stop()
            lr = lr_schedule.apply(optimizer, step) if lr_schedule is not None else None
            done = _one_step(
                batches,
                step=step,
                model=model,
                task=task,
                framework=framework,
                timer=timer,
                losses=losses,
                autocast=autocast,
            )
            if done is None:
                break
            batch, loss, host_data_s, host_step_s = done
            if profiler is not None:
                if step == profiler.first - 1 and step >= measured_end:
                    # a sampled window (after the measured steps) records only its own steps' device work:
                    # the profiler's warm-up step is done before recording starts (no measured step waits)
                    synchronize(device)
                profiler.step()
            samples = task.num_samples(batch)
            if plan.warmup_steps <= step < measured_end:
                measured_samples += samples
            samples_done += samples
            records.add(
                {
                    "step": step,
                    "epoch": epoch,
                    "step_in_epoch": step_in_epoch,
                    "samples": samples,
                    "warmup": step < plan.warmup_steps,
                    "profiled": profiler is not None and profiler.covers(step),
                    "host_data_s": host_data_s,
                    "host_step_s": host_step_s,
                    "lr": lr,
                }
            )
            records.write(timer.pop_ready())
            if plan.stop_on_nan:
                _stop_on_nan(framework, records.nonfinite_step, plan)
            step += 1
            step_in_epoch += 1
            if evaluation is not None and step < total and evaluates_after(step, step_in_epoch, epoch, plan):
                synchronize(device)  # the steps so far are done: the evaluation is in none of them
                eval_start = time.perf_counter()
                reached = evaluation(step, epoch, samples_done, t_run)
                if plan.warmup_steps < step <= measured_end:
                    t_start += time.perf_counter() - eval_start  # out of the measured window's wall time
                # the measured window needs steps: a target reached in the warm-up stops at a later evaluation
                if reached and step > plan.warmup_steps:
                    stop = True
                    break
        if events is not None:
            events.end("epoch_stop", epoch_num=epoch + 1)
        epoch += 1
        if step_in_epoch == 0:
            raise RuntimeError("the loader yielded no batch in a whole epoch")
    synchronize(device)
    if wall_s is None:
        wall_s = time.perf_counter() - t_start
        if meter is not None:
            meter.stop()
    records.write(timer.flush())
    if plan.stop_on_nan:
        _stop_on_nan(framework, records.nonfinite_step, plan)
    if evaluation is not None and not stop:
        evaluation(step, max(0, epoch - 1), samples_done, t_run)  # after the last step, in its epoch
    return LoopResult(
        measured_steps=min(step, measured_end) - plan.warmup_steps,
        measured_samples_local=measured_samples,
        wall_s_local=wall_s,
        last_loss=float(loss.detach().float().item()),
        stopped_at_target=stop,
        nonfinite_step=records.nonfinite_step,
    )


def plan_of(cfg: DictConfig, *, warmup: int, measured: int, window, amp_dtype, steps_per_epoch: int) -> LoopPlan:
    """The loop's plan from the run's settings and its planned steps."""
    return LoopPlan(
        warmup_steps=warmup,
        measured_steps=measured,
        log_every=cfg.run.log_every,
        amp_dtype=amp_dtype,
        trailing_steps=window.extra_steps if window else 0,
        eval_every=cfg.run.eval_every_steps,
        eval_every_epochs=cfg.run.eval_every_epochs,
        steps_per_epoch=steps_per_epoch,
        stop_on_nan=cfg.run.stop_on_nan,
    )
