"""The all-reduce through torch.distributed (NCCL on GPU, gloo on CPU), under torchrun's env://."""
from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

from benchmarks.commbench import Collective


def init(device: torch.device) -> None:
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo", init_method="env://", timeout=timedelta(minutes=10),
        **({"device_id": device} if device.type == "cuda" else {}),
    )


def collective(device: torch.device) -> Collective:
    def max_over_ranks(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    return Collective(
        name=dist.get_backend(), rank=dist.get_rank(), world_size=dist.get_world_size(),
        all_reduce=lambda t: dist.all_reduce(t), max_over_ranks=max_over_ranks,
        synchronize=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None),
        barrier=dist.barrier,
    )


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))
