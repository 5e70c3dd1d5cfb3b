"""Does a task train as stably under mixed precision as in float32? (issue 48)

Runs `ddlbench run` for each framework x precision on 2 CPU ranks (RetinaNet by default, 30 steps at lr 0.01)
and prints, side by side, each run's first non-finite step, its trend (the mean loss of the last third of the
steps over that of the first third) and its last third's mean loss against float32's of the same framework.

    python perf/amp_stability.py --out /tmp/amp_stability            # RetinaNet at 64 px, ddp and fsdp
    python perf/amp_stability.py --image-size 32 --frameworks ddp     # 32 px: float32 itself diverges
    python perf/amp_stability.py --image-size 800 --frameworks ddp --steps 50 system=h200 system.ranks_per_node=1 optim.lr=0.1
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

PRECISIONS = ("fp32", "amp_bf16", "amp_fp16")


def losses_of(run_dir: Path) -> list[float]:
    """Rank 0's loss at every step (NaN where it was not finite)."""
    lines = (run_dir / "rank0.jsonl").read_text().splitlines()[1:]
    return [
        float(json.loads(line.replace("NaN", "null").replace("Infinity", "null"))["loss"] or math.nan) for line in lines
    ]


def thirds(losses: list[float]) -> tuple[float, float]:
    """Mean loss of the first and of the last third of the steps (NaN if any is not finite)."""
    third = max(1, len(losses) // 3)
    return sum(losses[:third]) / third, sum(losses[-third:]) / third


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/amp_stability"), help="run.root of the runs")
    parser.add_argument("--frameworks", default="ddp,fsdp")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("overrides", nargs="*", help="more overrides for every run, e.g. system=h200 optim.lr=0.1")
    args = parser.parse_args()
    model = ["model=retinanet", f"model.image_size={args.image_size}", "model.num_classes=5", "run.per_gpu_batch=2"]
    common = [*model, "optim.lr=0.01", "run.warmup_steps=0", f"run.steps={args.steps}", "run.log_every=0",
              "system.ranks_per_node=2", f"run.root={args.out}", f"run.campaign=px{args.image_size}",
              *args.overrides]  # fmt: skip
    rows = []
    for framework in args.frameworks.split(","):
        reference = None
        for precision in PRECISIONS:
            run_dir = args.out / f"px{args.image_size}" / f"{framework}-{precision}"
            if not (run_dir / "summary.json").exists():
                argv = [
                    sys.executable,
                    "-m",
                    "ddlbench",
                    "run",
                    *common,
                    f"framework={framework}",
                    f"precision={precision}",
                    f"run.dir={run_dir}",
                ]
                done = subprocess.run(argv, capture_output=True, text=True)
                if done.returncode != 0:
                    rows.append((framework, precision, "failed", "-", "-", done.stderr.strip().splitlines()[-1][:80]))
                    continue
            losses = losses_of(run_dir)
            bad = next((i for i, x in enumerate(losses) if not math.isfinite(x)), None)
            first, last = thirds(losses)
            reference = last if precision == "fp32" else reference
            versus = "-" if reference is None or precision == "fp32" else f"{last / reference - 1:+.1%}"
            shown = " ".join(f"{x:.2f}" for x in losses[:3]) + " ... " + " ".join(f"{x:.2f}" for x in losses[-3:])
            rows.append((framework, precision, "-" if bad is None else str(bad), f"{last / first:.3f}", versus, shown))
    header = ("framework", "precision", "non-finite from", "trend (last/first third)", "last third vs fp32", "losses")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
