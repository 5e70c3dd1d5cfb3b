"""The node side of `ddlbench preflight`: one process per node (srun --ntasks-per-node=1, or one per host of
system.hosts), the only module of the preflight that imports torch.

    python -m launchers.lifecycle.preflight --out FILE --measure-s 30 [--threads 4] [--node NAME]
                                   [--rank I --world-size N --master-addr HOST --master-port P]

(under srun the rank, the nodes and rank 0's host come from Slurm's variables: benchmarks/distenv.py).

Every node first times a square matmul of a fixed size on each of its GPUs at once (bf16), or on its CPU
(fp32, --threads threads), for a share of --measure-s: the rate is the median of several timings. Then the
nodes are paired in rounds (launchers.lifecycle.preflight.probe.ring_rounds), and each pair times all-reduce of one buffer
(gloo on CPUs, NCCL on GPUs) for its share of the time. Rank 0 writes every node's figures to --out (never
over a file); the verdict is the command's (launchers/lifecycle/preflight/__init__.py).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from benchmarks import distenv
from launchers.lifecycle.preflight.probe import (
    CPU_ALLREDUCE_BYTES,
    CPU_GEMM_N,
    GEMM_SHARE,
    GPU_ALLREDUCE_BYTES,
    GPU_GEMM_N,
    MIN_TIMINGS,
    ring_rounds,
)

TIMING_S = 0.1  # one timing: as many calls as fill about this long
MAX_CALLS = 10_000


def node_name(given: str | None) -> str:
    """The node's name as the scheduler knows it (what sbatch --exclude takes): --node, Slurm's name, the host's."""
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def gemm_rates(devices: list[torch.device], *, seconds: float) -> list[float]:
    """TFLOP/s of each device: n x n matmuls on all of them at once, timed in batches sized to TIMING_S, for
    `seconds` (at least MIN_TIMINGS batches); the median batch's rate."""
    cuda = devices[0].type == "cuda"
    n, dtype = (GPU_GEMM_N, torch.bfloat16) if cuda else (CPU_GEMM_N, torch.float32)
    generator = torch.Generator().manual_seed(0)
    host = [torch.randn(n, n, generator=generator) for _ in range(2)]
    operands = [
        [m.to(device=d, dtype=dtype) for m in host] + [torch.empty(n, n, device=d, dtype=dtype)] for d in devices
    ]

    def timed(calls: int) -> list[float]:
        """Seconds of `calls` matmuls on each device, run at once."""
        if not cuda:
            start = time.perf_counter()
            a, b, c = operands[0]
            for _ in range(calls):
                torch.matmul(a, b, out=c)
            return [time.perf_counter() - start]
        events = []
        for d, (a, b, c) in zip(devices, operands):
            with torch.cuda.device(d):
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                for _ in range(calls):
                    torch.matmul(a, b, out=c)
                end.record()
                events.append((begin, end))
        for _, end in events:
            end.synchronize()
        return [begin.elapsed_time(end) / 1e3 for begin, end in events]

    timed(1)  # warm-up: kernels chosen, memory touched
    calls = max(1, min(MAX_CALLS, int(TIMING_S / max(max(timed(1)), 1e-9))))
    batches: list[list[float]] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(batches) < MIN_TIMINGS:
        batches.append(timed(calls))
    flops = 2 * n**3 * calls
    return [flops / statistics.median(b[i] for b in batches) / 1e12 for i in range(len(devices))]


def allreduce_time(group, *, device: torch.device, size_bytes: int, seconds: float) -> tuple[float, int]:
    """(median seconds of one all-reduce of size_bytes in this pair's group, calls timed): the pair agrees on
    the number of calls from its slower member's first call, so that both make the same calls."""
    buffer = torch.ones(size_bytes // 4, dtype=torch.float32, device=device)

    def once() -> float:
        start = time.perf_counter()
        dist.all_reduce(buffer, group=group)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start

    once()  # warm-up: the pair's connection set up
    first = torch.tensor([once()], dtype=torch.float64, device=device)
    dist.all_reduce(first, op=dist.ReduceOp.MAX, group=group)
    calls = max(MIN_TIMINGS, min(MAX_CALLS, int(seconds / max(first.item(), 1e-9))))
    return statistics.median(once() for _ in range(calls)), calls


def measure(args: argparse.Namespace) -> int:
    env = distenv.from_environ()
    rank = env.rank if args.rank is None else args.rank
    world = env.world_size if args.world_size is None else args.world_size
    addr = args.master_addr or env.master_addr + args.master_addr_suffix
    port = args.master_port or env.master_port
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        # a GPU profile's node that shows no GPU: named, not measured on its CPU (its peers would start NCCL)
        raise SystemExit(f"ddlbench: error: preflight: node {args.node or socket.gethostname()} sees no GPU")
    devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if cuda else [torch.device("cpu")]
    if not cuda:
        torch.set_num_threads(args.threads)
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"tcp://{addr}:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=args.timeout_s),
    )
    # object gathers and barriers over gloo, whatever the pairs' backend
    books = dist.new_group(backend="gloo") if cuda else None
    dist.barrier(group=books)  # the clock starts when every node is here
    started = time.perf_counter()
    rounds = ring_rounds(world)
    gemm_s = args.measure_s * (GEMM_SHARE if rounds else 1.0)
    rates = gemm_rates(devices, seconds=gemm_s)
    node = {
        "node": node_name(args.node),
        "rank": rank,
        "device": "cuda" if cuda else "cpu",
        "devices": [torch.cuda.get_device_name(d) for d in devices] if cuda else ["cpu"],
        "threads": torch.get_num_threads(),
        "gemm_n": GPU_GEMM_N if cuda else CPU_GEMM_N,
        "gemm_dtype": "bfloat16" if cuda else "float32",
        "gemm_tflops": rates,
    }
    dist.barrier(group=books)
    links = []
    size_bytes = GPU_ALLREDUCE_BYTES if cuda else CPU_ALLREDUCE_BYTES
    round_s = args.measure_s * (1 - GEMM_SHARE) / max(1, len(rounds))
    for k, pairs in enumerate(rounds):
        mine, _ = dist.new_subgroups_by_enumeration([list(pair) for pair in pairs])
        pair = next((p for p in pairs if rank in p), None)
        if pair is not None:
            time_s, calls = allreduce_time(mine, device=devices[0], size_bytes=size_bytes, seconds=round_s)
            links.append({"round": k, "ranks": list(pair), "time_s": time_s, "calls": calls})
        dist.barrier(group=books)
    node["links"], node["size_bytes"] = links, size_bytes
    node["measure_s"] = time.perf_counter() - started
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(node, gathered, dst=0, group=books)
    if rank == 0:
        with open(args.out, "x") as f:  # "x": never over an earlier preflight
            json.dump({"world_size": world, "nodes": gathered}, f, indent=1)
    dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m launchers.lifecycle.preflight", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="JSON of every node's figures, written by rank 0")
    p.add_argument("--measure-s", type=float, required=True, help="seconds of measuring (GEMM and all-reduce)")
    p.add_argument("--threads", type=int, default=1, help="CPU nodes: the GEMM's threads")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cpu", help="the profile's: every GPU, or the CPU")
    p.add_argument("--node", default=None, help="this node's name (default: SLURMD_NODENAME or the host name)")
    p.add_argument("--rank", type=int, default=None, help="without a launcher's variables: this node's rank")
    p.add_argument("--world-size", type=int, default=None, help="... and the number of nodes")
    p.add_argument("--master-addr", default=None, help="... and rank 0's host")
    p.add_argument("--master-port", type=int, default=None, help="... and its port")
    p.add_argument("--master-addr-suffix", default="", help="appended to the Slurm job's first node (system.*)")
    p.add_argument("--timeout-s", type=float, default=120.0, help="the rendezvous's and every collective's limit")
    return measure(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
