#!/usr/bin/env bash
# DeepSpeed vs DDP on the H200 machine (offline: python 3.12, torch 2.11 cu130).
#
# Carry in first (on a machine with internet): tools/fetch_deepspeed_device_inputs.sh -> .devwheels/deepspeed/
# (the deepspeed 0.19.8 wheel built without ops, its runtime deps, hydra-core/omegaconf/antlr4/tqdm).
#   perf/deepspeed_gpu.sh          # in the repository root on the GPU machine; carry [".devwheels/deepspeed"]
# 1. installs the carried wheels into $SITE (pip --target, offline) unless deepspeed and hydra import,
# 2. runs ResNet-50 bf16 synthetic for DDP and DeepSpeed ZeRO 0/1/2 on 1 GPU (and 2 when there are 2),
# 3. prints img/s, DeepSpeed/DDP ratios, per-GPU scaling efficiency, start-up seconds, and whether
#    anything was JIT-compiled (it should not be: TORCH_EXTENSIONS_DIR stays empty).
# Goals (issue 4): 1-GPU img/s within 3% of DDP; 2-GPU per-GPU efficiency >= 97% (ZeRO-0/1).
# DeepSpeed runs its default framework.mixed_precision=autocast: fp32 weights under torch.autocast, as DDP.
# Knobs: BATCH (256) WARMUP (20) STEPS (100) PYTHON (python3) SITE (/tmp/site) GPUS (all) STAGES ("0 1 2")
# ROUNDS (1: interleaved repeats; ratios use the mean per-GPU img/s over them).
set -euo pipefail
cd "$(dirname "$0")/.."
source perf/device_env.sh
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/ddlbench_torch_extensions}
mkdir -p "$TORCH_EXTENSIONS_DIR"
if ! "$PY" -c 'import deepspeed, hydra, omegaconf' 2>/dev/null; then
    [[ -d .devwheels/deepspeed ]] || { echo "deepspeed is missing and .devwheels/deepspeed is not here (run tools/fetch_deepspeed_device_inputs.sh and carry it)" >&2; exit 1; }
    start=$SECONDS
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/deepspeed/*.whl
    echo "install: $((SECONDS - start)) s"
fi
"$PY" -c 'import time; t = time.perf_counter(); import deepspeed; print(f"deepspeed {deepspeed.__version__} imports in {time.perf_counter() - t:.1f} s")'

ROOT=${OUT:-/tmp}/deepspeed_gpu
rm -rf "$ROOT"
GPUS=${GPUS:-$(nvidia-smi -L | wc -l)}
COMMON=(system=h200 model=resnet model.depth=50 precision=amp_bf16 loader=synthetic
        "run.per_gpu_batch=${BATCH:-256}" "run.warmup_steps=${WARMUP:-20}" "run.steps=${STEPS:-100}"
        run.log_every=50)
CELL_LINES=ZeRO  # the adapter's line on how ZeRO reduces
for ((round = 0; round < ${ROUNDS:-1}; round++)); do  # interleaved rounds: the machine drifts
    for n in 1 2; do
        (( GPUS >= n )) || continue
        run_cell ddp-g$n-r$round framework=ddp system.ranks_per_node=$n
        for z in ${STAGES:-0 1 2}; do
            run_cell ds-z$z-g$n-r$round framework=deepspeed framework.zero_stage=$z system.ranks_per_node=$n
        done
    done
done
echo "JIT-compiled extensions in $TORCH_EXTENSIONS_DIR: $(find "$TORCH_EXTENSIONS_DIR" -name '*.so' | wc -l)"

"$PY" - "$ROOT" <<'PYEOF'
import json, sys
from pathlib import Path

root = Path(sys.argv[1])
per_gpu = {}  # cell -> per-GPU img/s of each completed round
for d in sorted(root.iterdir()):
    summary = d / "summary.json"
    s = json.loads(summary.read_text()) if summary.exists() else {"status": "incomplete"}
    if s.get("status") == "completed":
        per_gpu.setdefault(d.name.rsplit("-r", 1)[0], []).append(s["per_gpu_img_s"])
        print(f"{d.name:<13} {s['throughput_img_s']:>9,.1f} img/s  {s['per_gpu_img_s']:>8,.1f} per GPU  loss {s['last_loss']:.3f}")
    else:
        print(f"{d.name:<13} {s.get('status')}: {s.get('error', '')}")

def img(name):  # mean over the rounds
    values = per_gpu.get(name)
    return sum(values) / len(values) if values else None

for n in (1, 2):
    for z in (0, 1, 2, 3):
        a, b = f"ds-z{z}-g{n}", f"ddp-g{n}"
        if img(a) and img(b):
            print(f"RESULT ratio {a} / {b}: {img(a) / img(b):.3f}  (goal on 1 GPU: >= 0.97)")
for fw in ["ddp"] + [f"ds-z{z}" for z in (0, 1, 2, 3)]:
    if img(f"{fw}-g2") and img(f"{fw}-g1"):
        print(f"RESULT per-GPU efficiency {fw} 2 vs 1 GPU: {img(f'{fw}-g2') / img(f'{fw}-g1'):.1%}  (goal ZeRO-0/1: >= 97%)")
PYEOF
