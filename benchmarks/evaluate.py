"""Validation: top-1, top-5 and the loss over a held-out set, during and after training.

Every rank evaluates its shard of the validation set (the sharding contract: each sample on exactly one
rank, each epoch), and the counts are summed over the ranks, so W ranks give exactly the accuracy one
process gets on the same data and weights. Rank 0 writes each evaluation to <run dir>/eval.jsonl
(run_files.EVAL_FIELDS and EVAL_OPTIONAL_FIELDS) and its MLLOG events (benchmarks/mllog.py). Its time is
logged apart (eval_s) and is in no training step: throughput never counts it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.mllog import MlLog
from benchmarks.rundir.run_files import EVAL_FILE


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    loader,
    *,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    reduce: Callable[[float, str], float],
    epoch: int = 0,
) -> dict:
    """{top1, top5, loss, samples, eval_s} of `model` on this rank's shard of `loader`, summed over all
    ranks with reduce(value, "sum") (the framework's all_reduce_scalar). `epoch`: the validation loader's
    own epoch, one more each evaluation (DALI's readers only go forward; the held-out set is not
    shuffled, so every epoch reads the same samples). The model is left in train mode."""
    start = time.perf_counter()
    model.eval()
    autocast = (
        (lambda: torch.autocast(device_type=device.type, dtype=amp_dtype)) if amp_dtype else contextlib.nullcontext
    )
    criterion = torch.nn.CrossEntropyLoss(reduction="sum")
    top1 = top5 = torch.zeros((), dtype=torch.float64, device=device)
    loss = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    loader.set_epoch(epoch)
    for images, labels in loader:
        with autocast():
            logits = model(images)
        loss += criterion(logits.float(), labels).double()
        best = logits.topk(min(5, logits.shape[1]), dim=1).indices
        hits = best == labels.view(-1, 1)
        top1 = top1 + hits[:, 0].sum()
        top5 = top5 + hits.any(dim=1).sum()
        count += int(labels.shape[0])
    model.train()
    totals = [reduce(float(value), "sum") for value in (top1, top5, loss, float(count))]
    samples = int(round(totals[3]))
    return {
        "top1": totals[0] / max(1, samples),
        "top5": totals[1] / max(1, samples),
        "loss": totals[2] / max(1, samples),
        "samples": samples,
        "eval_s": time.perf_counter() - start,
    }


def write_eval(run_dir: Path, record: dict) -> None:
    """Append one evaluation to eval.jsonl (rank 0)."""
    with open(Path(run_dir) / EVAL_FILE, "a") as f:
        f.write(json.dumps(record) + "\n")


class Validation:
    """The loop's evaluation (loop.Evaluation): every rank evaluates its shard; rank 0 appends eval.jsonl,
    writes the MLLOG eval events and prints one line. The first evaluation whose top-1 reaches
    `target_top1` is the run's time to target; from then on it answers True (stop)."""

    def __init__(
        self,
        model: torch.nn.Module,
        loader,
        *,
        device: torch.device,
        amp_dtype: torch.dtype | None,
        reduce: Callable[[float, str], float],
        run_dir: Path,
        rank: int,
        steps_per_epoch: int,
        target_top1: float | None = None,
        events: MlLog | None = None,
    ) -> None:
        self.model, self.loader, self.device, self.amp_dtype, self.reduce = model, loader, device, amp_dtype, reduce
        self.run_dir, self.rank, self.steps_per_epoch = Path(run_dir), rank, max(1, steps_per_epoch)
        self.target_top1, self.events = target_top1, events
        self.reached: dict | None = None  # the first evaluation at or above the target
        self.count = 0  # evaluations so far: the validation loader's epoch

    def __call__(self, step: int, epoch: int, samples_local: int, run_start_s: float) -> bool:
        epochs = round(step / self.steps_per_epoch, 4)
        if self.events is not None:
            self.events.start("eval_start", epoch_num=epochs)
        result = evaluate(
            self.model, self.loader, device=self.device, amp_dtype=self.amp_dtype, reduce=self.reduce, epoch=self.count
        )
        self.count += 1
        train_samples = int(round(self.reduce(float(samples_local), "sum")))
        record = {
            "step": step,
            "epoch": epoch,
            **result,
            "train_samples": train_samples,
            "train_s": time.perf_counter() - run_start_s,
            "epochs": epochs,
        }
        if self.target_top1 is not None and self.reached is None and result["top1"] >= self.target_top1:
            self.reached = record
        if self.rank == 0:
            if self.events is not None:
                self.events.end("eval_stop", epoch_num=epochs)
                self.events.event("eval_accuracy", round(result["top1"], 6), epoch_num=epochs)
            write_eval(self.run_dir, record)
            target = "" if self.reached is not record else f" (target {self.target_top1:.2%} reached: stopping)"
            print(
                f"[ddlbench] eval after step {step} (epoch {epochs:g}): top-1 {result['top1']:.2%}, top-5 "
                f"{result['top5']:.2%}, loss {result['loss']:.3f} on {result['samples']} samples "
                f"({result['eval_s']:.1f} s){target}",
                file=sys.stderr,
                flush=True,
            )
        return self.reached is not None

    def target_fields(self) -> dict:
        """summary.json's summary_schema.TARGET_FIELDS ({} without a target)."""
        if self.target_top1 is None:
            return {}
        hit = self.reached or {}
        return {
            "target_top1": self.target_top1,
            "target_reached": self.reached is not None,
            "time_to_target_s": hit.get("train_s"),
            "samples_to_target": hit.get("train_samples"),
            "steps_to_target": hit.get("step"),
        }
