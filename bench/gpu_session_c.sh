#!/usr/bin/env bash
# One device call (nvidia-h200), 2026-12-02: issue 20's workloads x {DDP, FSDP2, ZeRO-2} in bf16
# (bench/tasks_gpu.sh, no trace window), then a 1-GPU ResNet-50 bf16 batch-64 run (DALI-free, synthetic) whose
# run directory calibrates `ddlbench predict` for JUWELS (docs/predict.md). Carry [".devwheels/nlp",
# ".devwheels/deepspeed"]. Everything goes to $OUT/log.txt; the calibration run to $OUT/predict_one.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
start=$SECONDS
TRACE=off STEPS=${STEPS:-15} timeout -k 20 420 bash bench/tasks_gpu.sh
echo "== tasks: rc $?, wall $((SECONDS - start)) s"
source bench/device_env.sh
start=$SECONDS
timeout -k 20 120 "$PY" -m ddlbench.cli run system=h200 precision=amp_bf16 model=resnet model.depth=50 \
    loader=synthetic run.per_gpu_batch=64 run.warmup_steps=20 run.steps=100 run.log_every=0 run.trace=off \
    "run.dir=$OUT/predict_one" 2>&1 | grep -E "done:|rror"
echo "== predict calibration: wall $((SECONDS - start)) s"
} 2>&1 | tee "$OUT/log.txt"
