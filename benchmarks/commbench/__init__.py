"""`ddlbench commbench`: interconnect microbenchmarks, JSON out.

- all-reduce bus-bandwidth sweep (1 KiB .. --max-bytes, powers of two) through torch.distributed
  (NCCL on GPU, gloo on CPU), DeepSpeed's comm and Horovod where installed (their Collectives live in
  their framework adapters, the only modules that import them); bandwidths as nccl-tests define them: algbw = size / time,
  busbw = algbw * 2(n-1)/n for all-reduce; warm-up iterations are not timed; the time of a size
  is the slowest rank's mean over the timed iterations;
- GPU only: the P2P copy bandwidth / latency matrix between every pair of the node's GPUs (rank 0),
  and host-to-device bandwidth per GPU with every rank copying to its GPU at once.

Records (one JSON list, read by analysis/load.py): op, backend, world_size, size_bytes, time_s,
algbw_gb_s, busbw_gb_s, plus op-specific fields (src_gpu, dst_gpu, gpu, ...). GB is 1e9 bytes.
Started over N local ranks like `ddlbench run` (launchers/local.py's torchrun, or horovodrun
for --backends horovod); each rank runs `python -m benchmarks.commbench`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

KIB = 1024
CPU_MAX_BYTES = 4 * 1024**2  # gloo over 2 shared cores: keep it small
GPU_MAX_BYTES = 4 * 1024**3
# a backend is a framework whose adapter measures its own all-reduce (Framework.commbench_collective);
# torch names torch.distributed itself, the path DDP's all-reduce takes
BACKENDS = ("torch", "deepspeed", "horovod")


def framework_of(backend: str) -> str:
    """The framework option (conf/framework) that measures a commbench backend."""
    return "ddp" if backend == "torch" else backend


@dataclass(slots=True, kw_only=True)
class Measurement:
    op: str
    backend: str
    world_size: int
    size_bytes: int
    time_s: float
    algbw_gb_s: float
    busbw_gb_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        record = asdict(self)
        return {**{k: v for k, v in record.items() if k != "extra"}, **self.extra}


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Powers of two from min_bytes to max_bytes (both rounded to a power of two)."""
    first, last = int(math.log2(max(1, min_bytes))), int(math.log2(max(1, max_bytes)))
    return [2**k for k in range(first, last + 1)]


def algbw_gb_s(size_bytes: int, time_s: float) -> float:
    return size_bytes / time_s / 1e9


def allreduce_busbw_factor(world_size: int) -> float:
    """nccl-tests: an all-reduce moves 2(n-1)/n of the data over each rank's busiest link."""
    return 2 * (world_size - 1) / world_size


def allreduce_measurement(*, backend: str, world_size: int, size_bytes: int, time_s: float, **extra: Any) -> Measurement:
    algbw = algbw_gb_s(size_bytes, time_s)
    return Measurement(op="all_reduce", backend=backend, world_size=world_size, size_bytes=size_bytes, time_s=time_s,
                       algbw_gb_s=algbw, busbw_gb_s=algbw * allreduce_busbw_factor(world_size), extra=extra)


@dataclass(slots=True, kw_only=True)
class Collective:
    """What a sweep needs from a communication library."""
    name: str
    rank: int
    world_size: int
    all_reduce: Callable[[Any], None]  # in place, sum
    max_over_ranks: Callable[[float], float]
    synchronize: Callable[[], None]
    barrier: Callable[[], None]


def allreduce_sweep(comm: Collective, *, device, size_list: list[int], warmup: int, iters: int,
                    dtype=None) -> list[Measurement]:
    """Time `iters` back-to-back in-place all-reduces per size after `warmup` untimed ones."""
    import time

    import torch

    dtype = dtype or torch.float32
    item = torch.tensor([], dtype=dtype).element_size()
    out = []
    for size in size_list:
        tensor = torch.ones(max(1, size // item), dtype=dtype, device=device)
        for _ in range(warmup):
            comm.all_reduce(tensor)
        comm.synchronize()
        comm.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            comm.all_reduce(tensor)
        comm.synchronize()
        local_s = (time.perf_counter() - start) / iters
        time_s = comm.max_over_ranks(local_s)
        nbytes = tensor.numel() * item
        out.append(allreduce_measurement(backend=comm.name, world_size=comm.world_size, size_bytes=nbytes,
                                         time_s=time_s, dtype=str(dtype).removeprefix("torch."), iters=iters,
                                         warmup_iters=warmup, device=device.type))
        del tensor
    return out
