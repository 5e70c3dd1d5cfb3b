"""One rank of `ddlbench commbench` (started by torchrun or horovodrun): sweep, gather, rank 0 writes JSON."""
from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

import torch

from benchmarks.commbench import BACKENDS, CPU_MAX_BYTES, GPU_MAX_BYTES, KIB, allreduce_sweep, framework_of, sizes
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.frameworks.configs import Rendezvous


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.commbench")
    p.add_argument("--out", required=True, help="JSON file to write (rank 0); never overwritten")
    p.add_argument("--backends", default="torch", help=f"comma list of {', '.join(BACKENDS)}")
    p.add_argument("--min-bytes", type=int, default=KIB)
    p.add_argument("--max-bytes", type=int, default=None, help=f"default {GPU_MAX_BYTES} on GPU, {CPU_MAX_BYTES} on CPU")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--no-gpu-tests", action="store_true", help="skip the P2P matrix and the concurrent H2D copy")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from benchmarks.rundir import write_json_atomic

    args = parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    records: list[dict] = []
    skipped: list[str] = []
    adapters = {backend: _adapter(backend) for backend in backends}
    own = [b for b in backends if FRAMEWORKS[framework_of(b)].RENDEZVOUS is Rendezvous.own]
    if own:  # its own rendezvous (horovodrun, mpirun): alone, no torch.distributed group
        if len(backends) > 1:
            raise SystemExit(f"--backends {args.backends}: {own[0]} joins its ranks itself; run it alone (--backends {own[0]})")
        cls = adapters[own[0]]
        rank, local_rank, world = cls.commbench_join()
        device = _device(use_cuda, local_rank)
        size_list = sizes(args.min_bytes, args.max_bytes or (GPU_MAX_BYTES if use_cuda else CPU_MAX_BYTES))
        records += [m.record() for m in allreduce_sweep(cls.commbench_collective(device), device=device,
                                                        size_list=size_list, warmup=args.warmup, iters=args.iters)]
    else:
        from benchmarks.commbench import torch_dist

        local_rank = torch_dist.local_rank()
        device = _device(use_cuda, local_rank)
        torch_dist.init(device)
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        size_list = sizes(args.min_bytes, args.max_bytes or (GPU_MAX_BYTES if use_cuda else CPU_MAX_BYTES))
        for backend, cls in adapters.items():
            if not (found := cls.installation()).ok:
                skipped.append(f"{backend}: {found.detail} ({found.fix})")
                continue
            comm = cls.commbench_collective(device)
            records += [m.record() for m in allreduce_sweep(comm, device=device, size_list=size_list,
                                                            warmup=args.warmup, iters=args.iters)]
            if rank == 0:
                print(f"[commbench] {comm.name}: {len(size_list)} sizes done", file=sys.stderr, flush=True)
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
    if rank == 0:
        host = socket.gethostname()
        for record in records:
            record.setdefault("host", host)
        write_json_atomic(Path(args.out), records)
        print(format_table(records), flush=True)
        for line in skipped:
            print(f"[commbench] skipped {line}", file=sys.stderr)
        print(f"[commbench] wrote {len(records)} measurements to {args.out}", file=sys.stderr, flush=True)
    if not own:
        import torch.distributed as dist

        dist.barrier()  # no rank tears its connections down while rank 0 still writes the results
        dist.destroy_process_group()
    return 0


def _adapter(backend: str) -> type:
    """The framework adapter that measures a backend: torch is torch.distributed itself (DDP's path)."""
    from benchmarks.components import adapter_class

    if backend not in BACKENDS:
        raise SystemExit(f"--backends {backend!r} is unknown; choose from {', '.join(BACKENDS)}")
    return adapter_class("framework", framework_of(backend))


def _device(use_cuda: bool, local_rank: int) -> torch.device:
    if use_cuda:
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    torch.set_num_threads(1)
    return torch.device("cpu")


def format_table(records: list[dict]) -> str:
    lines = [f"{'op':<12}{'backend':<16}{'ranks':>6}{'size':>12}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  where"]
    for r in records:
        where = " ".join(f"{k}={r[k]}" for k in ("src_gpu", "dst_gpu", "gpu") if k in r)
        lines.append(f"{r['op']:<12}{r['backend']:<16}{r['world_size']:>6}{r['size_bytes']:>12}"
                     f"{r['time_s'] * 1e6:>12.1f}{r['algbw_gb_s']:>12.3f}{r['busbw_gb_s']:>12.3f}  {where}")
    return "\n".join(lines)


if __name__ == "__main__":
    from benchmarks.rankexit import exit_rank

    exit_rank(main())  # not interpreter finalization: benchmarks/rankexit.py says why
