"""What a communication library offers `ddlbench commbench`: its collectives (OPS), each an Op with an
out-of-place and an in-place form, gathered in a Collective. Torch-free: the framework adapters build
theirs (Framework.commbench_collective; torch.distributed's in frameworks/torch_dist.py), MPI's is
commbench/mpi.py, and the sweep (commbench/suite.py) times whichever it is handed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
ROOT = 0  # broadcast's root

# (send, recv) -> None: fills recv on every rank. In place, the buffers alias as nccl-tests lays them out:
# all_reduce, broadcast, all_to_all, send_recv: send is recv; all_gather: send is this rank's part of recv;
# reduce_scatter: recv is this rank's part of send.
Call = Callable[[Any, Any], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    """One collective of a library: its out-of-place and in-place forms, None where the library has
    no such form; `emulated` says how a form the library lacks is made from what it has."""

    out_of_place: Call | None
    in_place: Call | None
    emulated: str = ""  # e.g. "out-of-place: copy into the output, then in place" (that copy is timed)


@dataclass(slots=True, kw_only=True)
class Collective:
    """What a sweep needs from a communication library: every op of OPS (None where the library has
    none), and host-side helpers that do not go through the ops being measured."""

    name: str
    rank: int
    world_size: int
    all_reduce: Op | None  # sum
    all_gather: Op | None
    reduce_scatter: Op | None  # sum
    all_to_all: Op | None
    broadcast: Op | None  # from ROOT
    send_recv: Op | None  # ring: send to rank + 1, receive from rank - 1
    max_over_ranks: Callable[[float], float]
    sum_over_ranks: Callable[[float], float]
    synchronize: Callable[[], None]
    barrier: Callable[[], None]

    def op(self, name: str) -> Op | None:
        assert name in OPS, name
        return getattr(self, name)

    def lacks(self) -> list[str]:
        """What this library has no form of: 'send_recv', 'all_gather (in place)', ..."""
        out = []
        for name in OPS:
            found = self.op(name)
            if found is None:
                out.append(name)
            else:
                out += [
                    f"{name} ({mode})"
                    for mode, call in (("out of place", found.out_of_place), ("in place", found.in_place))
                    if call is None
                ]
        return out
