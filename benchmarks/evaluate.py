"""Validation: top-1, top-5 and the loss over a held-out set, during and after training.

Every rank evaluates its shard of the validation set (the sharding contract: each sample on exactly one
rank, each epoch), and the counts are summed over the ranks, so W ranks give exactly the accuracy one
process gets on the same data and weights. Rank 0 writes each evaluation to <run dir>/eval.jsonl
(rundir.EVAL_FIELDS). Its time is logged apart (eval_s) and is in no training step: throughput never counts it.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.rundir import EVAL_FILE


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    loader,
    *,
    device: torch.device,
    amp_dtype: torch.dtype | None,
    reduce: Callable[[float, str], float],
) -> dict:
    """{top1, top5, loss, samples, eval_s} of `model` on this rank's shard of `loader`, summed over all
    ranks with reduce(value, "sum") (the framework's all_reduce_scalar). The model is left in train mode."""
    start = time.perf_counter()
    model.eval()
    autocast = (
        (lambda: torch.autocast(device_type=device.type, dtype=amp_dtype)) if amp_dtype else contextlib.nullcontext
    )
    criterion = torch.nn.CrossEntropyLoss(reduction="sum")
    top1 = top5 = torch.zeros((), dtype=torch.float64, device=device)
    loss = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    loader.set_epoch(0)
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
