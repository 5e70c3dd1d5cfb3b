"""A bare RetinaNet training loop: the reference `ddlbench run model=retinanet` is held to.

Measures images/s of plain PyTorch training (no ddlbench loop, timers, logs or framework wrapper) on one
device: torchvision's retinanet_resnet50_fpn built from scratch (no weights; images kept at --image-size,
91 classes: what benchmarks/models builds for model=retinanet), weights and images channels_last, bf16
autocast, SGD (lr 0.01, momentum 0.9, weight decay 1e-4: the suite's optimizer defaults with
optim.lr=0.01), the sum of the model's classification and box-regression losses (as
benchmarks/tasks/detection.py), on NUM_BATCHES synthetic batches made once on the device and cycled (as
loader=synthetic): normal-noise images, each with 7 boxes of a side of 1/16 to 1/2 of the image at random
places and random labels. The time is the host's wall time over --steps steps after --warmup steps,
between two torch.cuda.synchronize() calls.

  python perf/bare_retinanet.py --batch 16 --image-size 800 --warmup 10 --steps 30
  python perf/bare_retinanet.py --device cpu --batch 2 --image-size 128 --warmup 1 --steps 2  # a check

Prints one RESULT line; --json FILE also writes it as a JSON object (perf/references_gpu.sh reads it).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torchvision.models.detection import retinanet_resnet50_fpn

BOXES = 7
NUM_BATCHES = 4


def synthetic_batch(batch: int, size: int, classes: int, device: torch.device, g: torch.Generator):
    """(images, targets): one {boxes x1 y1 x2 y2 in pixels, labels} per image."""
    images = torch.randn(batch, 3, size, size, generator=g).to(device).contiguous(memory_format=torch.channels_last)
    targets = []
    for _ in range(batch):
        side = size * (1 / 16 + (1 / 2 - 1 / 16) * torch.rand(BOXES, 2, generator=g))
        corner = (size - side) * torch.rand(BOXES, 2, generator=g)
        targets.append(
            {
                "boxes": torch.cat([corner, corner + side], dim=1).to(device),
                "labels": torch.randint(classes, (BOXES,), generator=g).to(device),
            }
        )
    return images, targets


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--image-size", type=int, default=800)
    p.add_argument("--num-classes", type=int, default=91)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="also write the result here")
    args = p.parse_args()
    device = torch.device(args.device)

    torch.manual_seed(0)
    model = retinanet_resnet50_fpn(
        weights=None,
        weights_backbone=None,
        num_classes=args.num_classes,
        min_size=args.image_size,
        max_size=args.image_size,
    )
    model = model.to(device).to(memory_format=torch.channels_last).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    g = torch.Generator().manual_seed(0)
    batches = [synthetic_batch(args.batch, args.image_size, args.num_classes, device, g) for _ in range(NUM_BATCHES)]

    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
        images, targets = batches[step % NUM_BATCHES]
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = sum(model(images, targets).values())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start

    result = {
        "script": "bare_retinanet",
        "batch": args.batch,
        "image_size": args.image_size,
        "warmup": args.warmup,
        "steps": args.steps,
        "seconds": seconds,
        "samples_per_s": args.batch * args.steps / seconds,
        "unit": "img/s",
        "last_loss": float(loss.detach()),
        "peak_allocated_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }
    print(
        f"RESULT bare_retinanet b{args.batch} {args.image_size}px: {result['samples_per_s']:,.1f} img/s "
        f"over {args.steps} steps ({seconds:.2f} s) after {args.warmup} warm-up, last loss {result['last_loss']:.3f}",
        flush=True,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
