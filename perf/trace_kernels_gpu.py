"""One device call: which kernels a ResNet step runs on this GPU and how benchmarks/tracereduce.py classes them
(the profiler records CPU + CUDA activity, as the trace window does: with CUDA alone the trace has no
ProfilerStep marks, seen on an H200 2026-12-01).
    python perf/trace_kernels_gpu.py [--depth 50] [--batch 256] [--top 30]"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from benchmarks.models import build_model
from benchmarks.tracereduce import classify, compute_kind, read_trace, trace_breakdown


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--depth", type=int, default=50)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args()
    dev = torch.device("cuda", 0)
    model = (
        build_model(arch="resnet", depth=args.depth, num_classes=1000, seed=0)
        .to(dev)
        .to(memory_format=torch.channels_last)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(args.batch, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(1000, (args.batch,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    for name, acts in (("cpu+cuda", [ProfilerActivity.CPU, ProfilerActivity.CUDA]),):
        path = Path(tempfile.mkdtemp()) / "t.json"
        with profile(activities=acts, schedule=schedule(wait=0, warmup=1, active=4, repeat=1)) as prof:
            for _ in range(5):
                step()
                prof.step()
        prof.export_chrome_trace(str(path))
        trace = read_trace(path)
        b = trace_breakdown(trace)
        sh = b.shares()
        print(
            f"== activities {name}: steps {b.steps}, window {b.window_s * 1e3:.1f} ms; "
            + " ".join(f"{k} {v:.1%}" for k, v in sh.items())
        )
        cats = collections.Counter(e.get("cat") for e in trace["traceEvents"])
        print("   categories:", dict(cats.most_common(8)))
        if name == "cpu+cuda":
            total = collections.Counter()
            for e in trace["traceEvents"]:
                if classify(e, device_trace=True) == "compute":
                    total[e["name"]] += float(e.get("dur", 0))
            grand = sum(total.values())
            for kname, us in total.most_common(args.top):
                print(f"   {us / grand:6.1%} {compute_kind(kname):<14} {kname[:150]}")


if __name__ == "__main__":
    main()
