"""The all-reduce through Horovod (started by horovodrun). The only commbench module that imports horovod."""
from __future__ import annotations

import torch

from benchmarks.commbench import Collective


def available() -> str | None:
    import importlib.util

    return None if importlib.util.find_spec("horovod") else "horovod is not installed (make horovod)"


def init() -> tuple[int, int, int]:
    """hvd.init(); (rank, local rank, world size)."""
    import horovod.torch as hvd

    hvd.init()
    return hvd.rank(), hvd.local_rank(), hvd.size()


def collective(device: torch.device) -> Collective:
    import horovod.torch as hvd

    def max_over_ranks(x: float) -> float:
        return float(hvd.allreduce(torch.tensor([x], dtype=torch.float64), op=hvd.Max, name="commbench.max").item())

    return Collective(
        name="horovod", rank=hvd.rank(), world_size=hvd.size(),
        all_reduce=lambda t: hvd.allreduce_(t, op=hvd.Sum, name="commbench.allreduce"),
        max_over_ranks=max_over_ranks,
        synchronize=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None),
        barrier=lambda: hvd.allreduce(torch.zeros(1), name="commbench.barrier"),
    )
