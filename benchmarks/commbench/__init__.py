"""`ddlbench commbench`: interconnect microbenchmarks, JSON out and nccl-tests' table. Torch-free at import.

- the collective suite (suite.py): all_reduce, all_gather, reduce_scatter, all_to_all, broadcast and
  send_recv, out-of-place and in-place, over sizes 1 KiB .. --max-bytes (powers of two), through
  torch.distributed (NCCL on GPU, gloo on CPU), DeepSpeed's comm, Horovod and plain MPI (mpi4py);
  each framework's Collective (the protocol: benchmarks/collective.py) lives in its framework adapter,
  the only module that imports it, torch.distributed's in frameworks/torch_dist.py and MPI's in mpi.py. Sizes, counts and bandwidths as nccl-tests define them (doc/PERFORMANCE.md):
  algbw = S / t with S the whole array (for all_gather the gathered output, for reduce_scatter the
  input), busbw = algbw * the op's bus factor (BUS_FACTORS). Warm-up iterations are not timed; the
  time of a size is the slowest rank's mean over the timed iterations. After timing, one more
  call on inputs filled with rank-dependent values is checked element by element (`wrong`).
- GPU only (gpu.py): the P2P copy bandwidth / latency matrix between every pair of the node's GPUs
  (rank 0), and host-to-device bandwidth per GPU with every rank copying to its GPU at once.

Records (one JSON list, read by analysis/load.py): op, backend, world_size, size_bytes, time_s,
algbw_gb_s, busbw_gb_s; the suite adds in_place, wrong (None: not checked), count, dtype, redop, root,
iters, warmup_iters, device, emulated; GPU tests their own fields (src_gpu, dst_gpu, gpu, ...).
GB is 1e9 bytes. docs/commbench.md has the definitions, the backends and what each lacks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks.collective import OPS
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.frameworks.configs import Rendezvous

KIB = 1024
CPU_MAX_BYTES = 4 * 1024**2  # gloo over 2 shared cores: keep it small
GPU_MAX_BYTES = 4 * 1024**3
# a backend is a communication library commbench measures: a framework whose adapter builds its own
# Collective (Framework.commbench_collective; torch names torch.distributed itself, the path DDP's
# all-reduce takes), or plain MPI through mpi4py (mpi.py), which no framework adapter owns
FRAMEWORK_OF = {"torch": "ddp", "deepspeed": "deepspeed", "horovod": "horovod"}
MPI = "mpi"
BACKENDS = (*FRAMEWORK_OF, MPI)

DEFAULT_OPS = ("all_reduce",)  # what commbench measured before the suite; --ops all for every op
PLACEMENTS = {"both": (False, True), "out": (False,), "in": (True,)}


def add_sweep_arguments(parser) -> None:
    """The sweep's options, shared by `ddlbench commbench` (launchers/commbench.py) and its ranks
    (`python -m benchmarks.commbench`): one home for their defaults."""
    parser.add_argument(
        "--backends",
        default="torch",
        help=f"comma list of {', '.join(BACKENDS)}: torch and deepspeed share one launch; horovod and mpi run alone",
    )
    parser.add_argument("--ops", default=",".join(DEFAULT_OPS), help=f"comma list of {', '.join(OPS)}, or all")
    parser.add_argument(
        "--placement",
        choices=tuple(PLACEMENTS),
        default="both",
        help="out of place, in place, or both (nccl-tests' two column groups)",
    )
    parser.add_argument("--no-check", action="store_true", help="skip the per-size check of every output element")
    parser.add_argument("--min-bytes", type=int, default=KIB)
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=None,
        help=f"largest size; default {GPU_MAX_BYTES} B on GPU, {CPU_MAX_BYTES} B on CPU",
    )
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per size")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per size")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--no-gpu-tests", action="store_true", help="skip the P2P matrix and the concurrent H2D copy")


REDUCING = {"all_reduce", "reduce_scatter"}  # sum; the others have no redop ("none", as nccl-tests prints)


def parse_ops(text: str) -> list[str]:
    """--ops: a comma list of OPS (in OPS' order), or all; ConfigError naming the flag otherwise."""
    asked = [o.strip() for o in text.split(",") if o.strip()]
    if asked == ["all"]:
        return list(OPS)
    unknown = [o for o in asked if o not in OPS]
    if unknown or not asked:
        raise ConfigError(
            f"--ops {text!r}: {', '.join(map(repr, unknown)) or 'nothing'} is no op; choose from "
            f"{', '.join(OPS)} or all"
        )
    return [o for o in OPS if o in asked]


def framework_of(backend: str) -> str | None:
    """The framework option (conf/framework) that measures a commbench backend; None for mpi."""
    return FRAMEWORK_OF.get(backend)


def rendezvous_of(backend: str) -> Rendezvous:
    """torch: runs on the torch.distributed group commbench creates (several share one launch);
    own: joins its ranks itself (Horovod's hvd.init, MPI_Init), so it runs alone under its launcher."""
    framework = framework_of(backend)
    return Rendezvous.own if framework is None else FRAMEWORKS[framework].RENDEZVOUS


def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' correction from algbw to busbw (doc/PERFORMANCE.md): the share of S that crosses each
    rank's busiest link at best. all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
    broadcast and send_recv 1 (all data leaves the root / the sender)."""
    n = world_size
    factors = {
        "all_reduce": 2 * (n - 1) / n,
        "all_gather": (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "broadcast": 1.0,
        "send_recv": 1.0,
    }
    return factors[op]


def allreduce_busbw_factor(world_size: int) -> float:
    """nccl-tests: an all-reduce moves 2(n-1)/n of the data over each rank's busiest link."""
    return bus_factor("all_reduce", world_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """One size of one op as nccl-tests lays it out: element counts of each rank's input and output,
    the count the call takes (nccl-tests' `count` column) and S, the bytes algbw divides by."""

    send_count: int
    recv_count: int
    count: int
    item_bytes: int

    @property
    def size_bytes(self) -> int:
        return max(self.send_count, self.recv_count) * self.item_bytes


def layout(op: str, size_bytes: int, *, item_bytes: int, world_size: int) -> Layout | None:
    """The buffers of `op` for a requested size; None when the size leaves no element per rank.
    Ops that split S over the ranks (all_gather, reduce_scatter, all_to_all) round each rank's part
    down to a multiple of 16 bytes, as nccl-tests does, so S may be a little below the request."""
    total = size_bytes // item_bytes
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        part = (total // world_size) & ~(max(1, 16 // item_bytes) - 1)
        if part == 0:
            return None
        send, recv = {
            "all_gather": (part, part * world_size),
            "reduce_scatter": (part * world_size, part),
            "all_to_all": (part * world_size, part * world_size),
        }[op]
        return Layout(send_count=send, recv_count=recv, count=part, item_bytes=item_bytes)
    if total == 0:
        return None
    return Layout(send_count=total, recv_count=total, count=total, item_bytes=item_bytes)


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


def measurement(*, op: str, backend: str, world_size: int, size_bytes: int, time_s: float, **extra: Any) -> Measurement:
    """A timed size of a collective with nccl-tests' algbw and busbw."""
    algbw = algbw_gb_s(size_bytes, time_s)
    return Measurement(
        op=op,
        backend=backend,
        world_size=world_size,
        size_bytes=size_bytes,
        time_s=time_s,
        algbw_gb_s=algbw,
        busbw_gb_s=algbw * bus_factor(op, world_size),
        extra=extra,
    )


def allreduce_measurement(
    *, backend: str, world_size: int, size_bytes: int, time_s: float, **extra: Any
) -> Measurement:
    return measurement(
        op="all_reduce", backend=backend, world_size=world_size, size_bytes=size_bytes, time_s=time_s, **extra
    )
