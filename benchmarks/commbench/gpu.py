"""GPU interconnect: P2P copy bandwidth/latency between every pair of the node's GPUs (one process
drives them all), and host-to-device bandwidth per GPU while every rank copies at once."""

from __future__ import annotations

import torch

from benchmarks.commbench import Measurement, algbw_gb_s

P2P_BYTES = 256 * 1024**2
H2D_BYTES = 256 * 1024**2


def _timed(fn, *, device: torch.device, warmup: int, iters: int) -> float:
    """Mean seconds of fn() on `device` (CUDA events around `iters` calls after `warmup`)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.device(device):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / iters


def p2p_matrix(*, size_bytes: int = P2P_BYTES, warmup: int = 3, iters: int = 10) -> list[Measurement]:
    """Copy bandwidth (size_bytes) and latency (4 bytes) from GPU i to GPU j for every i != j."""
    count = torch.cuda.device_count()
    out = []
    for src in range(count):
        for dst in range(count):
            if src == dst:
                continue
            peer = torch.cuda.can_device_access_peer(src, dst)
            for op, nbytes in (("p2p_copy", size_bytes), ("p2p_latency", 4)):
                a = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{src}")
                b = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{dst}")
                time_s = _timed(
                    lambda a=a, b=b: b.copy_(a, non_blocking=True),
                    device=torch.device("cuda", src),
                    warmup=warmup,
                    iters=iters if op == "p2p_copy" else 100,
                )
                torch.cuda.synchronize(dst)
                bw = algbw_gb_s(nbytes, time_s)
                out.append(
                    Measurement(
                        op=op,
                        backend="cuda",
                        world_size=count,
                        size_bytes=nbytes,
                        time_s=time_s,
                        algbw_gb_s=bw,
                        busbw_gb_s=bw,
                        extra={"src_gpu": src, "dst_gpu": dst, "peer_access": peer},
                    )
                )
                del a, b
    return out


def h2d_concurrent(
    *, device: torch.device, barrier, world_size: int, size_bytes: int = H2D_BYTES, warmup: int = 3, iters: int = 10
) -> Measurement:
    """This rank's pinned-host -> its GPU bandwidth, every rank copying at the same time."""
    host = torch.empty(size_bytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(size_bytes, dtype=torch.uint8, device=device)
    copy = lambda: gpu.copy_(host, non_blocking=True)  # noqa: E731
    for _ in range(warmup):
        copy()
    torch.cuda.synchronize(device)
    barrier()  # all ranks start their copies together
    time_s = _timed(copy, device=device, warmup=0, iters=iters)
    bw = algbw_gb_s(size_bytes, time_s)
    return Measurement(
        op="h2d_copy",
        backend="cuda",
        world_size=world_size,
        size_bytes=size_bytes,
        time_s=time_s,
        algbw_gb_s=bw,
        busbw_gb_s=bw,
        extra={"gpu": device.index, "concurrent_gpus": world_size},
    )
