"""The collectives through torch.distributed (NCCL on GPU, gloo on CPU), on a group over every rank.

torch.distributed has no out-of-place all_reduce or broadcast (both work on one tensor): out of place,
the input is copied into the output first, and that copy is timed with the call. It has no in-place
all_to_all or send/recv (the output would overwrite input that other ranks still read).
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from benchmarks import distenv
from benchmarks.collective import ROOT, Collective, Op

COPY_THEN_IN_PLACE = "out-of-place: copy into the output, then in place"


def init(device: torch.device) -> None:
    """One torch.distributed group over every rank, from whichever launcher started them (torchrun, srun,
    mpirun, deepspeed: benchmarks/distenv.py reads each one's variables)."""
    env = distenv.from_environ()
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        init_method=f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(minutes=10),
        **({"device_id": device} if device.type == "cuda" else {}),
    )


def ops(module) -> dict[str, Op]:
    """The six ops through a torch.distributed-like module (torch.distributed itself, deepspeed.comm)."""

    def all_reduce(send, recv):
        if recv is not send:
            recv.copy_(send)
        module.all_reduce(recv)

    def broadcast(send, recv):
        if recv is not send and module.get_rank() == ROOT:
            recv.copy_(send)
        module.broadcast(recv, ROOT)

    rank, n = module.get_rank(), module.get_world_size()

    def send_recv(send, recv):
        # one group, as nccl-tests' ncclGroupStart/End: NCCL runs a pair's send and receive on one stream, so
        # two ranks that each sent before receiving would wait for each other
        requests = module.batch_isend_irecv(
            [module.P2POp(module.isend, send, (rank + 1) % n), module.P2POp(module.irecv, recv, (rank - 1) % n)]
        )
        for request in requests:
            request.wait()

    return {
        "all_reduce": Op(out_of_place=all_reduce, in_place=all_reduce, emulated=COPY_THEN_IN_PLACE),
        "all_gather": Op(
            out_of_place=lambda s, r: module.all_gather_into_tensor(r, s),
            in_place=lambda s, r: module.all_gather_into_tensor(r, s),
        ),
        "reduce_scatter": Op(
            out_of_place=lambda s, r: module.reduce_scatter_tensor(r, s),
            in_place=lambda s, r: module.reduce_scatter_tensor(r, s),
        ),
        "all_to_all": Op(out_of_place=lambda s, r: module.all_to_all_single(r, s), in_place=None),
        "broadcast": Op(out_of_place=broadcast, in_place=broadcast, emulated=COPY_THEN_IN_PLACE),
        "send_recv": Op(out_of_place=send_recv, in_place=None),
    }


def collective(device: torch.device) -> Collective:
    def reduced(x: float, op) -> float:
        t = torch.tensor([x], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=op)
        return float(t.item())

    return Collective(
        name=dist.get_backend(),
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        **ops(dist),
        max_over_ranks=lambda x: reduced(x, dist.ReduceOp.MAX),
        sum_over_ranks=lambda x: reduced(x, dist.ReduceOp.SUM),
        synchronize=(lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None),
        barrier=dist.barrier,
    )


def local_rank() -> int:
    return distenv.from_environ().local_rank
