"""MLPerf-style `:::MLLOG` events of a run, in <run dir>/mllog.txt (rank 0), beside the JSONL logs, written by
MLPerf's own logger (mlperf_logging.mllog, package mlperf-logging: the `mllog` extra), so the file is what its
parser and compliance checker read (`ddlbench results --check-mllog`):
    :::MLLOG {"namespace": "", "time_ms": 1764625200123, "event_type": "INTERVAL_START",
              "key": "run_start", "value": null, "metadata": {"file": "benchmarks/loop.py", "lineno": 305}}
Events: init_start / init_stop, the run's settings (global_batch_size, opt_name, ...), run_start at the
first training step, epoch_start / epoch_stop, eval_start / eval_stop / eval_accuracy (top-1 as a
fraction, metadata.epoch_num), run_stop with metadata.status (success, or aborted when a target top-1
was set and not reached) and time_to_train (seconds from run_start to run_stop). Epochs count from 1,
as MLPerf's do. Without the package the run goes on without the file and says so once.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.rundir.run_files import MLLOG_FILE

TOKEN = ":::MLLOG"
INTERVAL_START, INTERVAL_END, POINT_IN_TIME = "INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME"
MISSING = "no mllog.txt: the mlperf-logging package is not installed (pip install 'ddlbench[mllog]')"


class MlLog:
    """Appends events to <run dir>/mllog.txt through an MLLogger of its own (a logging.Logger named for the
    run, one file handler, flushed per event: a killed run keeps what it logged)."""

    def __init__(self, run_dir: Path, *, clock=time.time) -> None:
        self._clock = clock
        self.run_start_s: float | None = None
        self._mllogger = self._handler = None
        try:
            from mlperf_logging.mllog.mllog import MLLogger
        except ImportError:
            print(f"[ddlbench] {MISSING}", file=sys.stderr, flush=True)
            return
        path = Path(run_dir) / MLLOG_FILE
        logger = logging.getLogger(f"ddlbench.mllog.{path}")  # not mllog's shared default logger (stdout)
        logger.propagate = False
        logger.setLevel(logging.INFO)
        self._handler = logging.FileHandler(path, mode="a")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(self._handler)
        self._logger = logger
        # the call site in metadata: the caller of event()/start()/end() (MlLog's own frames skipped)
        self._mllogger = MLLogger(logger=logger, root_dir=re.escape(str(Path(__file__).parents[1])))

    def event(self, key: str, value: Any = None, *, event_type: str = POINT_IN_TIME, **metadata: Any) -> float:
        """Write one event; returns its time (seconds since the epoch)."""
        return self._log(key, value, event_type=event_type, frames=0, **metadata)

    def _log(self, key: str, value: Any, *, event_type: str, frames: int, **metadata: Any) -> float:
        # frames: MlLog's own frames between the caller and event() (start, end: one more)
        now = self._clock()
        if self._mllogger is not None:
            log = {INTERVAL_START: self._mllogger.start, INTERVAL_END: self._mllogger.end}.get(
                event_type, self._mllogger.event
            )
            log(key, value, metadata=metadata or None, time_ms=int(round(now * 1000)), stack_offset=2 + frames)
        return now

    def start(self, key: str, **metadata: Any) -> float:
        return self._log(key, None, event_type=INTERVAL_START, frames=1, **metadata)

    def end(self, key: str, **metadata: Any) -> float:
        return self._log(key, None, event_type=INTERVAL_END, frames=1, **metadata)

    def run_start(self) -> None:
        self.end("init_stop")
        self.run_start_s = self.start("run_start")

    def run_stop(self, *, status: str) -> float:
        """run_stop and time_to_train (from run_start); returns that time in seconds."""
        stop = self.end("run_stop", status=status)
        time_to_train_s = stop - (self.run_start_s if self.run_start_s is not None else stop)
        self.event("time_to_train", round(time_to_train_s, 6))
        return time_to_train_s

    def close(self) -> None:
        if self._handler is not None:
            self._logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None


MLPERF_PRECISION = {"bfloat16": "bfloat16", "float16": "fp16"}  # autocast's dtype as MLPerf's keys spell it


def precision_events(cfg) -> dict[str, str]:
    """MLPerf's precision disclosure (lowest_numerical_precision_in_linear, _attn, _comm) of the run: autocast's
    dtype; without it fp32, or tf32 where a CUDA run lets cuDNN (convolutions: linear layers) or cuBLAS
    (matmuls, attention) use it (benchmarks/peaks.py Tf32); the gradients' reduction in the amp dtype where the
    framework sends half the fp32 bytes (its gradient_messages) or compresses to fp16, else fp32."""
    from benchmarks.adapter_config import adapter_config
    from benchmarks.gradients import Gradient
    from benchmarks.peaks import Tf32, torch_tf32

    amp = cfg.precision.amp_dtype
    if amp is not None:
        linear = attention = MLPERF_PRECISION[str(amp)]
    else:
        tf32 = torch_tf32() if str(cfg.system.device) == "cuda" else Tf32(convolutions=False, matmuls=False)
        linear = "tf32" if tf32.convolutions or tf32.matmuls else "fp32"
        attention = "tf32" if tf32.matmuls else "fp32"
    comm = "fp32"
    try:
        (bucket,) = adapter_config(cfg.framework).gradient_messages(
            [Gradient("w", 4096, 1.0, True)], amp=amp is not None
        )
        comm = attention if amp is not None and bucket.bytes < 4096 else comm
    except ValueError:  # one process (DataParallel): nothing is reduced between ranks
        pass
    if cfg.framework.get("fp16_compression"):  # Horovod's fp16 compression of every gradient
        comm = "fp16"
    return {
        "lowest_numerical_precision_in_linear": linear,
        "lowest_numerical_precision_in_attn": attention,
        "lowest_numerical_precision_in_comm": comm,
    }


def submission_events(log: MlLog, submission) -> None:
    """The submission keys a site's profile sets (system.mllog: benchmarks/schema.py MllogSubmissionConfig)."""
    for key in ("submission_org", "submission_platform", "submission_division"):
        if submission.get(key) is not None:
            log.event(key, str(submission[key]))


def settings_events(log: MlLog, *, cfg, global_batch: int, train_samples: int | None, eval_samples: int | None) -> None:
    """The run's settings as MLPerf's keys: those a reader of an MLPerf log looks for first, and those the
    checker's common rules ask of every log (training 6.1.0 common.yaml: cache_clear, the precision and
    parallelism disclosure, micro_batch_size, config_filename); the submission keys where the profile has them."""
    submission_events(log, cfg.system.mllog)
    log.event("submission_benchmark", cfg.model.arch)
    # whether data.path's page cache was dropped before the run (data.cache=cold), as MLPerf logs its cache clear
    log.event("cache_clear", str(cfg.data.cache) == "cold")
    log.event("global_batch_size", global_batch)
    log.event("micro_batch_size", int(cfg.run.per_gpu_batch))
    # DeepSpeed's gradient_accumulation_steps, Horovod's backward_passes_per_step; the others step every batch
    framework = cfg.framework
    log.event(
        "gradient_accumulation_steps",
        int(framework.get("gradient_accumulation_steps") or framework.get("backward_passes_per_step") or 1),
    )
    for key in ("tensor_parallelism", "pipeline_parallelism", "context_parallelism", "expert_parallelism"):
        log.event(key, 1)  # data parallel only: every rank holds the whole model
    for key, value in precision_events(cfg).items():
        log.event(key, value)
    log.event("config_filename", "config.yaml")  # the resolved config, beside mllog.txt in the run directory
    log.event("opt_name", cfg.optim.name)
    log.event("opt_base_learning_rate", float(cfg.optim.lr))
    log.event("opt_learning_rate_warmup_steps", int(cfg.optim.schedule.warmup_steps))
    log.event("opt_learning_rate_schedule", cfg.optim.schedule.name)
    log.event("seed", int(cfg.run.seed))
    if train_samples is not None:
        log.event("train_samples", train_samples)
    if eval_samples is not None:
        log.event("eval_samples", eval_samples)
    if cfg.run.target_top1 is not None:
        log.event("target_accuracy", float(cfg.run.target_top1))
