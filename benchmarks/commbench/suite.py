"""The collective suite on one rank: buffers laid out as nccl-tests lays them, timed calls, and a check of
every output element against the value it must have.

Inputs hold small integers that depend on the rank and the element's index (`pattern`), stored as
float32: every sum over up to 1024 ranks is an integer below 2**24, so it is exact in any reduction
order and an output is right only when it equals the expected value bit for bit (nccl-tests' check).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from benchmarks.collective import OPS, ROOT, Collective, Op
from benchmarks.commbench import REDUCING, Layout, Measurement, layout, measurement

DTYPE = torch.float32
DTYPE_NAME = "float"  # as nccl-tests names it
PRIME = 97  # pattern values are 0..96: sums over n ranks stay below 2**24 (exact in float32) for n <= 174762


def pattern(rank: int, start: int, count: int, *, device: torch.device) -> torch.Tensor:
    """Rank `rank`'s input value for global elements start .. start + count - 1 (int32, 0..PRIME-1)."""
    index = torch.arange(start, start + count, dtype=torch.int64, device=device) % PRIME
    return ((index * 13 + 7 * rank + 1) % PRIME).to(torch.int32)


def _sum_over(world_size: int, start: int, count: int, device: torch.device) -> torch.Tensor:
    """Sum of every rank's pattern. 7 and PRIME are coprime, so PRIME consecutive ranks hold every residue
    once at each element: full cycles of ranks add PRIME * (PRIME - 1) / 2 each, and at most PRIME - 1 ranks
    are added one by one (1024 ranks: 54 passes, not 1024)."""
    cycles, rest = divmod(world_size, PRIME)
    total = torch.full((count,), cycles * PRIME * (PRIME - 1) // 2, dtype=torch.int32, device=device)
    for k in range(cycles * PRIME, world_size):
        total += pattern(k, start, count, device=device)
    return total


def inputs_and_expected(
    op: str, lay: Layout, *, rank: int, world_size: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's input, the output it must receive), as DTYPE. Parts are numbered by global index, so a
    part that lands in the wrong place is wrong."""
    n, part = world_size, lay.count
    if op == "all_reduce":
        send, want = pattern(rank, 0, lay.send_count, device=device), _sum_over(n, 0, lay.recv_count, device)
    elif op == "all_gather":
        send = pattern(rank, rank * part, part, device=device)
        want = torch.cat([pattern(k, k * part, part, device=device) for k in range(n)])
    elif op == "reduce_scatter":
        send, want = pattern(rank, 0, lay.send_count, device=device), _sum_over(n, rank * part, part, device)
    elif op == "all_to_all":  # part j goes to rank j; rank r receives part r of every rank
        send = pattern(rank, 0, lay.send_count, device=device)
        want = torch.cat([pattern(k, rank * part, part, device=device) for k in range(n)])
    elif op == "broadcast":
        send, want = pattern(rank, 0, lay.send_count, device=device), pattern(ROOT, 0, lay.recv_count, device=device)
    elif op == "send_recv":
        send, want = (
            pattern(rank, 0, lay.send_count, device=device),
            pattern((rank - 1) % n, 0, lay.recv_count, device=device),
        )
    else:
        raise AssertionError(op)
    return send.to(DTYPE), want.to(DTYPE)


@dataclass(slots=True)
class Buffers:
    """The tensors one call takes: send and recv, aliased in place as nccl-tests aliases them."""

    send: torch.Tensor
    recv: torch.Tensor
    storage: torch.Tensor  # what in-place calls write to (recv, or send for reduce_scatter's recv part)

    def fill(self, values: torch.Tensor) -> None:
        self.send.copy_(values)


def buffers(op: str, lay: Layout, *, rank: int, in_place: bool, device: torch.device) -> Buffers:
    if not in_place:
        send = torch.empty(lay.send_count, dtype=DTYPE, device=device)
        recv = torch.full((lay.recv_count,), -1.0, dtype=DTYPE, device=device)
        return Buffers(send=send, recv=recv, storage=recv)
    if op == "all_gather":  # this rank's part of the output is its input
        recv = torch.full((lay.recv_count,), -1.0, dtype=DTYPE, device=device)
        return Buffers(send=recv.narrow(0, rank * lay.count, lay.count), recv=recv, storage=recv)
    if op == "reduce_scatter":  # the output is this rank's part of the input
        send = torch.empty(lay.send_count, dtype=DTYPE, device=device)
        return Buffers(send=send, recv=send.narrow(0, rank * lay.count, lay.count), storage=send)
    both = torch.empty(lay.send_count, dtype=DTYPE, device=device)
    return Buffers(send=both, recv=both, storage=both)


@dataclass(slots=True)
class Timed:
    time_s: float
    wrong: int | None  # elements wrong over all ranks; None: not checked


def run_one(
    comm: Collective,
    call,
    op: str,
    lay: Layout,
    *,
    in_place: bool,
    device: torch.device,
    warmup: int,
    iters: int,
    check: bool,
) -> Timed:
    """Time `iters` back-to-back calls after `warmup` untimed ones, then check one call on fresh inputs."""
    rank, n = comm.rank, comm.world_size
    values, want = inputs_and_expected(op, lay, rank=rank, world_size=n, device=device)
    buf = buffers(op, lay, rank=rank, in_place=in_place, device=device)
    buf.fill(values)
    for _ in range(warmup):
        call(buf.send, buf.recv)
    comm.synchronize()
    comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call(buf.send, buf.recv)
    comm.synchronize()
    time_s = comm.max_over_ranks((time.perf_counter() - start) / iters)
    wrong = None
    if check:
        # outputs start wrong: a call that writes nothing must not find the timed calls' results there
        buf.storage.fill_(-1.0)
        buf.recv.fill_(-1.0)
        buf.fill(values)
        comm.barrier()
        call(buf.send, buf.recv)
        comm.synchronize()
        local = int((buf.recv != want).sum().item())
        wrong = int(comm.sum_over_ranks(float(local)))
    del buf
    return Timed(time_s=time_s, wrong=wrong)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One size of one op: the layout and its out-of-place and in-place measurements (None: not measured)."""

    op: str
    layout: Layout
    out_of_place: Measurement | None
    in_place: Measurement | None


def sweep(
    comm: Collective,
    *,
    ops: list[str],
    device: torch.device,
    size_list: list[int],
    warmup: int,
    iters: int,
    placements: tuple[bool, ...] = (False, True),
    check: bool = True,
) -> list[Row]:
    """Every op of `ops` the library has, at every size, in each placement (False: out of place) it has."""
    item = torch.tensor([], dtype=DTYPE).element_size()
    rows = []
    for name in ops:
        assert name in OPS, name
        if (op := comm.op(name)) is None:
            continue
        if name == "send_recv" and comm.world_size < 2:
            continue  # a ring of one sends to itself
        for size in size_list:
            lay = layout(name, size, item_bytes=item, world_size=comm.world_size)
            if lay is None:
                continue
            found: dict[bool, Measurement | None] = {}
            for in_place in (False, True):
                call = op.in_place if in_place else op.out_of_place
                if in_place not in placements or call is None:
                    found[in_place] = None
                    continue
                done = run_one(
                    comm, call, name, lay, in_place=in_place, device=device, warmup=warmup, iters=iters, check=check
                )
                found[in_place] = _measurement(
                    comm, op, name, lay, in_place=in_place, done=done, device=device, warmup=warmup, iters=iters
                )
            if found[False] or found[True]:  # an op without the asked placement (e.g. in place) has no row
                rows.append(Row(op=name, layout=lay, out_of_place=found[False], in_place=found[True]))
    return rows


def _measurement(
    comm: Collective,
    op: Op,
    name: str,
    lay: Layout,
    *,
    in_place: bool,
    done: Timed,
    device: torch.device,
    warmup: int,
    iters: int,
) -> Measurement:
    return measurement(
        op=name,
        backend=comm.name,
        world_size=comm.world_size,
        size_bytes=lay.size_bytes,
        time_s=done.time_s,
        in_place=in_place,
        wrong=done.wrong,
        count=lay.count,
        dtype=DTYPE_NAME,
        redop="sum" if name in REDUCING else "none",
        root=ROOT if name == "broadcast" else -1,
        iters=iters,
        warmup_iters=warmup,
        device=device.type,
        emulated=op.emulated if _emulated(op, in_place) else "",
    )


def _emulated(op: Op, in_place: bool) -> bool:
    """Whether this placement is the emulated one: the note names it ('out-of-place: ...', 'in-place: ...')."""
    return op.emulated.startswith("in-place" if in_place else "out-of-place")


def records(rows: list[Row]) -> list[dict]:
    return [m.record() for row in rows for m in (row.out_of_place, row.in_place) if m is not None]
