"""MLPerf-style `:::MLLOG` events of a run, in <run dir>/mllog.txt (rank 0), beside the JSONL logs.

One line per event, in the format MLPerf's logging package (mlperf-logging) writes and its parser reads:
    :::MLLOG {"namespace": "", "time_ms": 1764625200123, "event_type": "INTERVAL_START",
              "key": "run_start", "value": null, "metadata": {"file": "benchmarks/loop.py", "lineno": 0}}
Events: init_start / init_stop, the run's settings (global_batch_size, opt_name, ...), run_start at the
first training step, epoch_start / epoch_stop, eval_start / eval_stop / eval_accuracy (top-1 as a
fraction, metadata.epoch_num), run_stop with metadata.status (success, or aborted when a target top-1
was set and not reached) and time_to_train (seconds from run_start to run_stop). Epochs count from 1,
as MLPerf's do. Written by ddlbench itself: the package is not needed to run, only to check the file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks.rundir import MLLOG_FILE

TOKEN = ":::MLLOG"
INTERVAL_START, INTERVAL_END, POINT_IN_TIME = "INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME"


class MlLog:
    """Appends events to <run dir>/mllog.txt, each line flushed (a killed run keeps what it logged)."""

    def __init__(self, run_dir: Path, *, clock=time.time) -> None:
        self._file = open(Path(run_dir) / MLLOG_FILE, "a")
        self._clock = clock
        self.run_start_s: float | None = None

    def event(self, key: str, value: Any = None, *, event_type: str = POINT_IN_TIME, **metadata: Any) -> float:
        """Write one event; returns its time (seconds since the epoch)."""
        now = self._clock()
        record = {
            "namespace": "",
            "time_ms": int(round(now * 1000)),
            "event_type": event_type,
            "key": key,
            "value": value,
            "metadata": {"file": "ddlbench", "lineno": 0, **metadata},
        }
        self._file.write(f"{TOKEN} {json.dumps(record)}\n")
        self._file.flush()
        return now

    def start(self, key: str, **metadata: Any) -> float:
        return self.event(key, event_type=INTERVAL_START, **metadata)

    def end(self, key: str, **metadata: Any) -> float:
        return self.event(key, event_type=INTERVAL_END, **metadata)

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
        self._file.close()


def settings_events(log: MlLog, *, cfg, global_batch: int, train_samples: int | None, eval_samples: int | None) -> None:
    """The run's settings as MLPerf's keys (those a reader of an MLPerf log looks for first)."""
    log.event("submission_benchmark", cfg.model.arch)
    log.event("global_batch_size", global_batch)
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
