"""Where Horovod's parameters part from DDP's on a model with BatchNorm, and why the parting depends on the
machine's load: the same ResNet-18 CPU run (3 ranks, synthetic data, BatchNorm and max-pool) under DDP, DDP
with other buckets, Horovod with and without tensor fusion (quiet, and with the CPU loaded by busy
processes) and DeepSpeed ZeRO-0, compared with DDP after one update and after four.

    python perf/rounding_cpu.py [--ranks 3] [--out DIR]

Prints, per variant and number of updates, how many parameter elements differ from DDP's and the largest
difference as a share of its tensor's largest value. Not a test: a measurement (docs/horovod.md has the
figures and the reading).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conftest import cpu_loaded  # noqa: E402

RUN = [
    "model=resnet",
    "model.depth=18",
    "model.image_size=32",
    "model.num_classes=10",
    "loader=synthetic",
    "system=local_cpu",
    "run.per_gpu_batch=8",
    "run.warmup_steps=0",
    "run.log_every=0",
    "run.save_params=true",
    "optim.lr=0.01",
]
VARIANTS = {
    "ddp": ["framework=ddp"],
    "ddp, 1 MB buckets": ["framework=ddp", "framework.bucket_cap_mb=1"],
    "horovod": ["framework=horovod"],
    "horovod, CPU loaded": ["framework=horovod"],
    "horovod, no fusion": ["framework=horovod", "framework.fusion_threshold_mb=0"],
    "horovod, no fusion, CPU loaded": ["framework=horovod", "framework.fusion_threshold_mb=0"],
    "deepspeed ZeRO-0": ["framework=deepspeed", "framework.zero_stage=0"],
}


def params(run_dir: Path) -> dict:
    import torch

    state = torch.load(run_dir / "params_rank0.pt")
    # the trained parameters only: BatchNorm's running statistics are per rank under Horovod (no broadcast)
    return {k.removeprefix("module."): v for k, v in state.items() if "running_" not in k and "num_batches" not in k}


def difference(reference: dict, other: dict) -> tuple[int, float, str]:
    """(elements that differ, the largest |difference| / max |parameter| of its tensor, that tensor)."""
    differing, worst, where = 0, 0.0, "-"
    for name, value in reference.items():
        delta = (other[name].double() - value.double()).abs()
        differing += int((delta > 0).sum())
        share = float(delta.max()) / max(float(value.double().abs().max()), 1e-30)
        if share > worst:
            worst, where = share, name
    return differing, worst, where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--out", default=None, help="where the runs go (default: a temporary folder)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="rounding-"))
    rows = []
    for steps in (1, 4):
        dirs = {}
        for k, (name, overrides) in enumerate(VARIANTS.items()):
            run_dir = out / f"s{steps}-{k}"
            argv = [
                sys.executable,
                "-m",
                "ddlbench",
                "run",
                *RUN,
                f"system.ranks_per_node={args.ranks}",
                f"run.steps={steps}",
                *overrides,
                f"run.dir={run_dir}",
            ]
            loaded = "CPU loaded" in name
            print(f"[rounding] {steps} update(s): {name}", file=sys.stderr, flush=True)
            with cpu_loaded() if loaded else nullcontext():
                subprocess.run(argv, check=True, capture_output=True)
            dirs[name] = run_dir
        reference = params(dirs["ddp"])
        for name in list(VARIANTS)[1:]:
            rows.append((steps, name, *difference(reference, params(dirs[name]))))
        quiet, loaded = params(dirs["horovod, no fusion"]), params(dirs["horovod, no fusion, CPU loaded"])
        rows.append((steps, "horovod no fusion: loaded vs quiet", *difference(quiet, loaded)))
    print(
        f"{'updates':>7}  {'variant (against ddp)':<36} {'elements differing':>18} {'max |diff| / max |p|':>20}  tensor"
    )
    for steps, name, differing, worst, where in rows:
        print(f"{steps:>7}  {name:<36} {differing:>18,} {worst:>20.2e}  {where}")
    print(f"# runs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
