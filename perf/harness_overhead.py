"""ddlbench's loop vs a bare hand-written PyTorch loop, same model/batch/precision, in ONE process.

Rounds alternate bare / ddlbench so that machine noise hits both; the ratio is what counts.
  python perf/harness_overhead.py --depth 50 --batch 256 --precision amp_bf16 --system h200 [--compile]
--compile: both loops torch.compile the model (ddlbench's side: model.compile=true).
Prints img/s of each round and the median ratio ddlbench / bare (goal on 1 H200: >= 0.99).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.adapters import AMP_DTYPES
from benchmarks.config import compose
from benchmarks.models import build_model
from launchers.lifecycle import rank


def bare_loop(
    *,
    depth: int,
    batch: int,
    amp_dtype: str | None,
    channels_last: bool,
    warmup: int,
    steps: int,
    device: torch.device,
    compile_model: bool = False,
) -> float:
    """The loop a careful user writes by hand: no timers, no logs, no framework wrapper."""
    model = build_model(arch="resnet", depth=depth, num_classes=1000, seed=0).to(device)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    if compile_model:
        model = torch.compile(model)
    criterion = torch.nn.CrossEntropyLoss()
    images = torch.randn(batch, 3, 224, 224, device=device).contiguous(memory_format=memory_format)
    labels = torch.randint(1000, (batch,), device=device)
    dtype = AMP_DTYPES[amp_dtype]
    for step in range(warmup + steps):
        if step == warmup:
            torch.cuda.synchronize(device) if device.type == "cuda" else None
            start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device) if device.type == "cuda" else None
    return batch * steps / (time.perf_counter() - start)


def ddlbench_loop(*, overrides: list[str], root: Path, index: int) -> float:
    cfg = compose([*overrides, f"run.dir={root / f'round{index}'}", "run.log_every=0"])
    assert rank.run(cfg) == 0
    return json.loads((root / f"round{index}" / "summary.json").read_text())["throughput_img_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--precision", default="amp_bf16")
    parser.add_argument("--system", default="h200")
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model in both loops")
    parser.add_argument(
        "extra", nargs="*", help="more overrides for ddlbench's side, e.g. framework.wrap_single_rank=true"
    )
    args = parser.parse_args()
    overrides = [
        "framework=ddp",
        "loader=synthetic",
        "model=resnet",
        f"model.depth={args.depth}",
        f"precision={args.precision}",
        f"system={args.system}",
        "system.ranks_per_node=1",
        f"run.per_gpu_batch={args.batch}",
        f"run.warmup_steps={args.warmup}",
        f"run.steps={args.steps}",
        *(["model.compile=true"] if args.compile else []),
        *args.extra,
    ]
    cfg = compose(overrides)
    device = torch.device("cuda", 0) if cfg.system.device == "cuda" else torch.device("cpu")
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.rounds):
            bare = bare_loop(
                depth=args.depth,
                batch=args.batch,
                amp_dtype=cfg.precision.amp_dtype,
                channels_last=cfg.precision.channels_last,
                warmup=args.warmup,
                steps=args.steps,
                device=device,
                compile_model=args.compile,
            )
            ours = ddlbench_loop(overrides=overrides, root=Path(tmp), index=index)
            ratios.append(ours / bare)
            print(
                f"round {index}: bare {bare:,.1f} img/s | ddlbench {ours:,.1f} img/s | ratio {ours / bare:.4f}",
                flush=True,
            )
    print(
        f"RESULT harness_overhead resnet{args.depth} b{args.batch} {args.precision} {args.system}"
        f"{' compiled' if args.compile else ''}: "
        f"{' '.join(args.extra)}: median ratio ddlbench/bare = {statistics.median(ratios):.4f} over {args.rounds} rounds"
    )


if __name__ == "__main__":
    main()
