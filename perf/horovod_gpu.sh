#!/usr/bin/env bash
# Horovod vs DDP on the H200 machine (offline: python 3.12, torch 2.11 cu130, nvcc 13 in
# /usr/local/cuda-13.0, NCCL from the torch venv's nvidia/nccl).
#
# Carry in first (on a machine with internet): tools/fetch_horovod_device_inputs.sh -> .devwheels/horovod/
# and ddlbench's pure-python deps in .devwheels/base/ (hydra-core, omegaconf, antlr4, tqdm).
#   perf/horovod_gpu.sh            # in the repository root on the GPU machine
# 1. builds Horovod 0.28.1 with NCCL (+ Gloo) into $SITE (pip --target; the wheel is cached, so a
#    second call in the same warm machine only installs),
# 2. runs ResNet-50 bf16 synthetic for DDP and Horovod on 1 GPU (and 2 when there are 2), and
# 3. prints img/s, Horovod/DDP ratios and, with 2 GPUs, per-GPU scaling efficiency.
# Goals (issue 3): Horovod 1-GPU img/s within 2% of DDP's; Horovod per-GPU efficiency on 2 >= 98%.
# Knobs: BATCH (256) WARMUP (20) STEPS (100) PYTHON (python3) SITE (/tmp/site) GPUS (all).
set -euo pipefail
cd "$(dirname "$0")/.."
source perf/device_env.sh

echo "== build (NCCL) =="
start=$SECONDS
HOROVOD_INPUTS=$PWD/.devwheels/horovod HOROVOD_TARGET=$SITE HOROVOD_OPS=nccl tools/build_horovod.sh "$PY"
echo "build + install: $((SECONDS - start)) s"

ROOT=${OUT:-/tmp}/horovod_gpu
rm -rf "$ROOT"
GPUS=${GPUS:-$(nvidia-smi -L | wc -l)}
COMMON=(system=h200 model=resnet model.depth=50 precision=amp_bf16 loader=synthetic
        "run.per_gpu_batch=${BATCH:-256}" "run.warmup_steps=${WARMUP:-20}" "run.steps=${STEPS:-100}"
        run.log_every=50)
run_cell ddp-g1 framework=ddp system.ranks_per_node=1
run_cell ddp-nchw-g1 framework=ddp system.ranks_per_node=1 precision.channels_last=false
run_cell horovod-g1 framework=horovod system.ranks_per_node=1
run_cell horovod-timer-g1 framework=horovod system.ranks_per_node=1 framework.comm_timer=on
if (( GPUS >= 2 )); then
    run_cell ddp-g2 framework=ddp system.ranks_per_node=2
    run_cell horovod-g2 framework=horovod system.ranks_per_node=2
    run_cell horovod-timer-g2 framework=horovod system.ranks_per_node=2 framework.comm_timer=on
fi

"$PY" - "$ROOT" <<'EOF'
import json, statistics, sys
from pathlib import Path

root = Path(sys.argv[1])
cells = {}
for d in sorted(root.iterdir()):
    summary = d / "summary.json"
    s = json.loads(summary.read_text()) if summary.exists() else {"status": "incomplete"}
    cells[d.name] = s
    exposed = ""
    if s.get("status") == "completed":
        steps = [json.loads(l) for l in (d / "rank0.jsonl").read_text().splitlines()]
        comm = [r["comm_exposed_s"] for r in steps if not r.get("warmup", True) and r.get("comm_exposed_s") is not None]
        exposed = f"  exposed allreduce {statistics.median(comm) * 1e3:.2f} ms/step" if comm else ""
        print(f"{d.name:<22} {s['throughput_img_s']:>9,.1f} img/s  {s['per_gpu_img_s']:>8,.1f} per GPU{exposed}")
    else:
        print(f"{d.name:<22} {s.get('status')}: {s.get('error', '')}")
    if d.name.startswith("horovod-g") and (d / "meta.json").exists():
        fw = json.loads((d / "meta.json").read_text())["framework"]
        print(f"{'':<22} built {fw['built']} controller {fw['controller']} weights {fw['weights_memory_format']}")

def img(name):
    s = cells.get(name, {})
    return s.get("per_gpu_img_s") if s.get("status") == "completed" else None

for a, b in [("horovod-g1", "ddp-g1"), ("horovod-timer-g1", "ddp-g1"), ("horovod-g1", "ddp-nchw-g1"),
             ("horovod-timer-g1", "ddp-nchw-g1"), ("horovod-g2", "ddp-g2"), ("horovod-timer-g2", "ddp-g2")]:
    if img(a) and img(b):
        print(f"ratio {a} / {b}: {img(a) / img(b):.3f}")
for fw in ("ddp", "horovod", "horovod-timer"):
    if img(f"{fw}-g2") and img(f"{fw}-g1"):
        print(f"per-GPU efficiency {fw} 2 vs 1 GPU: {img(f'{fw}-g2') / img(f'{fw}-g1'):.1%}")
EOF
