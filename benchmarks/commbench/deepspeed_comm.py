"""The all-reduce through deepspeed.comm (its wrapper over the same torch.distributed group).
The only commbench module that imports deepspeed."""
from __future__ import annotations

import torch

from benchmarks.commbench import Collective


def available() -> str | None:
    """None when usable, else why not."""
    import importlib.util

    return None if importlib.util.find_spec("deepspeed") else "deepspeed is not installed (pip install -e '.[deepspeed]')"


def collective(device: torch.device) -> Collective:
    from benchmarks.frameworks.deepspeed import _import_deepspeed

    deepspeed = _import_deepspeed(device)
    import deepspeed.comm as ds_comm

    # reuses the torch.distributed group commbench created
    deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo", auto_mpi_discovery=False)

    def max_over_ranks(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64, device=device)
        ds_comm.all_reduce(t, op=ds_comm.ReduceOp.MAX)
        return float(t.item())

    return Collective(
        name="deepspeed",
        rank=ds_comm.get_rank(), world_size=ds_comm.get_world_size(),
        all_reduce=lambda t: ds_comm.all_reduce(t), max_over_ranks=max_over_ranks,
        synchronize=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None),
        barrier=ds_comm.barrier,
    )
