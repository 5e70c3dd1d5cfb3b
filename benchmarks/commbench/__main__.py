"""One rank of `ddlbench commbench` (started by torchrun, horovodrun, mpirun or srun): sweep, rank 0 writes
JSON and prints nccl-tests' table."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

import torch

from benchmarks.collective import OPS
from benchmarks.commbench import (
    BACKENDS,
    CPU_MAX_BYTES,
    GPU_MAX_BYTES,
    MPI,
    PLACEMENTS,
    add_sweep_arguments,
    framework_of,
    parse_ops,
    rendezvous_of,
    sizes,
)
from benchmarks.frameworks.configs import Rendezvous


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.commbench")
    p.add_argument("--out", required=True, help="JSON file to write (rank 0); never overwritten")
    add_sweep_arguments(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.commbench import suite
    from benchmarks.rundir.run_files import write_json_atomic

    args = parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    ops = parse_ops(args.ops)
    adapters = {backend: _adapter(backend) for backend in backends}
    records: list[dict] = []
    tables: list[str] = []
    own = [b for b in backends if rendezvous_of(b) is Rendezvous.own]
    # refused before any rank joins a group: every rank sees the same files and installation
    if Path(args.out).exists():
        return _refuse(f"--out {args.out} exists (never overwritten); pass another --out")
    for backend, cls in adapters.items():
        if not (found := cls.installation()).ok:
            return _refuse(f"--backends {backend}: {found.detail}; {found.fix}")

    def measure(backend: str, comm, device: torch.device, size_list: list[int]) -> None:
        rows = suite.sweep(
            comm,
            ops=ops,
            device=device,
            size_list=size_list,
            warmup=args.warmup,
            iters=args.iters,
            placements=PLACEMENTS[args.placement],
            check=not args.no_check,
        )
        records.extend(suite.records(rows))
        lacks = [name for name in comm.lacks() if name.split(" ")[0] in ops]
        tables.append(
            format_nccl_tests(rows, backend=comm.name, world_size=comm.world_size, device=device.type, lacks=lacks)
        )

    if own:  # its own rendezvous (horovodrun, mpirun): alone, no torch.distributed group
        if len(backends) > 1:
            raise SystemExit(
                f"--backends {args.backends}: {own[0]} joins its ranks itself; run it alone (--backends {own[0]})"
            )
        cls = adapters[own[0]]
        rank, local_rank, world = cls.commbench_join()
        # MPI moves host memory (benchmarks/commbench/mpi.py); --device cuda is refused there, by name
        use_cuda = _use_cuda(args.device) and (own[0] != MPI or args.device == "cuda")
        device = _device(use_cuda, local_rank)
        size_list = sizes(args.min_bytes, args.max_bytes or (GPU_MAX_BYTES if use_cuda else CPU_MAX_BYTES))
        measure(own[0], cls.commbench_collective(device), device, size_list)
    else:
        from benchmarks.frameworks import torch_dist

        use_cuda = _use_cuda(args.device)
        local_rank = torch_dist.local_rank()
        device = _device(use_cuda, local_rank)
        torch_dist.init(device)
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        size_list = sizes(args.min_bytes, args.max_bytes or (GPU_MAX_BYTES if use_cuda else CPU_MAX_BYTES))
        for backend, cls in adapters.items():
            comm = cls.commbench_collective(device)
            measure(backend, comm, device, size_list)
            if rank == 0:
                print(
                    f"[commbench] {comm.name}: {len(ops)} op(s) x {len(size_list)} sizes done",
                    file=sys.stderr,
                    flush=True,
                )
        if use_cuda and not args.no_gpu_tests:
            from benchmarks.commbench import gpu

            h2d = gpu.h2d_concurrent(device=device, barrier=dist.barrier, world_size=world).record()
            gathered: list = [None] * world
            dist.all_gather_object(gathered, h2d)
            # the other ranks wait on the host: an NCCL barrier is a kernel spinning on their GPUs, which
            # time-slices with rank 0's copies to those GPUs and slows them by orders of magnitude
            # (docs/results/2026-11-29-h200-x2.md)
            host_group = dist.new_group(backend="gloo")
            if rank == 0:
                records += gathered
                records += [m.record() for m in gpu.p2p_matrix()]
            dist.barrier(group=host_group)
    bad = 0
    if rank == 0:
        host = socket.gethostname()
        num_nodes = _num_nodes()  # for ddlbench predict: intra- or inter-node
        for record in records:
            record.setdefault("host", host)
            record.setdefault("num_nodes", num_nodes)
        write_json_atomic(Path(args.out), records)
        print("\n".join(tables), flush=True)
        others = [r for r in records if r["op"] not in OPS]
        if others:
            print(format_table(others), flush=True)
        bad = sum(r["wrong"] or 0 for r in records if "wrong" in r)
        if bad:  # a collective that computes wrong values is a finding: the command fails, as nccl-tests' check does
            print(f"ddlbench: error: {bad} wrong output element(s): see #wrong above", file=sys.stderr)
        print(f"[commbench] wrote {len(records)} measurements to {args.out}", file=sys.stderr, flush=True)
    if not own:
        import torch.distributed as dist

        dist.barrier()  # no rank tears its connections down while rank 0 still writes the results
        dist.destroy_process_group()
    return 1 if rank == 0 and bad else 0


def _num_nodes() -> int:
    """The nodes the ranks span, as the launcher tells them (benchmarks/distenv.py)."""
    from benchmarks import distenv

    return distenv.from_environ().num_nodes


def _refuse(message: str) -> int:
    """One line from the first rank (the others exit with it): a ConfigError's exit code, 2."""
    if os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMIX_RANK", "0"))) == "0":
        print(f"ddlbench: error: {message}", file=sys.stderr, flush=True)
    return 2


def _adapter(backend: str) -> type:
    """What measures a backend: its framework adapter (torch is torch.distributed itself, DDP's path), or
    mpi.MPIBackend, which has the same commbench methods."""
    from benchmarks.adapters import adapter_class

    if backend not in BACKENDS:
        raise SystemExit(f"--backends {backend!r} is unknown; choose from {', '.join(BACKENDS)}")
    if backend == MPI:
        from benchmarks.commbench.mpi import MPIBackend

        return MPIBackend
    return adapter_class("framework", framework_of(backend))


def _use_cuda(device: str) -> bool:
    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


def _device(use_cuda: bool, local_rank: int) -> torch.device:
    if use_cuda:
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    torch.set_num_threads(1)
    return torch.device("cpu")


def _fit(value: float, width: int) -> str:
    """A number in `width` characters: 2 decimals, fewer where it is wide, else exponent form."""
    for text in (f"{value:{width}.2f}", f"{value:{width}.1f}", f"{value:{width}.0f}"):
        if len(text) <= width:
            return text
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def _body(m) -> str:
    """One placement's columns: time (us), algbw, busbw (GB/s), #wrong (N/A: not checked or not measured)."""
    if m is None:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
    wrong = "N/A" if m.extra.get("wrong") is None else str(m.extra["wrong"])
    return f"  {_fit(m.time_s * 1e6, 7)}  {_fit(m.algbw_gb_s, 6)}  {_fit(m.busbw_gb_s, 6)}  {wrong:>6}"


def format_nccl_tests(rows, *, backend: str, world_size: int, device: str, lacks: list[str]) -> str:
    """The table nccl-tests prints (its column layout: size, count, type, redop, root, then time, algbw,
    busbw and #wrong out of place and in place), one block per op."""
    lines = [f"# ddlbench commbench: backend {backend}, {world_size} ranks, {device}"]
    if lacks:
        lines.append(f"# {backend} lacks: {', '.join(lacks)} (N/A below)")
    for op in OPS:
        mine = [row for row in rows if row.op == op]
        if not mine:
            continue
        lines += [
            "#",
            f"# {op}",
            f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place",
            f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
            f"{'busbw':>6}  {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}",
            f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
            f"{'(GB/s)':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}",
        ]
        for row in mine:
            first = row.out_of_place or row.in_place
            lines.append(
                f"{row.layout.size_bytes:>12}  {row.layout.count:>12}  {first.extra['dtype']:>8}  "
                f"{first.extra['redop']:>6}  {first.extra['root']:>6}{_body(row.out_of_place)}{_body(row.in_place)}"
            )
    return "\n".join(lines)


def format_table(records: list[dict]) -> str:
    """The GPU tests (P2P matrix, concurrent H2D): one line per measurement."""
    lines = [
        f"{'op':<12}{'backend':<16}{'ranks':>6}{'size':>12}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  where"
    ]
    for r in records:
        where = " ".join(f"{k}={r[k]}" for k in ("src_gpu", "dst_gpu", "gpu") if k in r)
        lines.append(
            f"{r['op']:<12}{r['backend']:<16}{r['world_size']:>6}{r['size_bytes']:>12}"
            f"{r['time_s'] * 1e6:>12.1f}{r['algbw_gb_s']:>12.3f}{r['busbw_gb_s']:>12.3f}  {where}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    from benchmarks.errors import ConfigError
    from launchers.lifecycle.forked_rank import exit_rank

    try:
        code = main()
    except ConfigError as error:  # one line, as the CLI prints it, not a traceback per rank
        print(f"ddlbench commbench: error: {error}", file=sys.stderr)
        code = 2
    exit_rank(code)  # not interpreter finalization: launchers/lifecycle/forked_rank.py says why
