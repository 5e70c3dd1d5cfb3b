#!/usr/bin/env bash
# One device call (nvidia-h200): dp / fsdp / ddp+zero_optimizer on a GPU with peak memory in summary.json,
# and `ddlbench maxbatch` finding the largest batch (ResNet-50 bf16 at 896 px keeps the batch small).
# Carry .devwheels/base (hydra-core, omegaconf, antlr4, pyyaml, tqdm for CPython 3.12). Results: docs/results/2026-12-01-h200-modes-memory.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
"$PY" -c "import torch; print('torch', torch.__version__)"
ROOT=$OUT/runs
COMMON=(system=h200 precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=128 run.warmup_steps=5
        run.steps=10 run.log_every=0 run.save_params=false)
for fw in "framework=ddp" "framework=fsdp" "framework=fsdp framework.reshard_after_forward=false" \
          "framework=ddp framework.zero_optimizer=true" "framework=dp"; do
    label=$(echo "$fw" | tr ' =.' '___')
    run_cell "$label" $fw
    "$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); print('  ', s['status'], s.get('world_size'), s.get('num_processes'), 'img/s %.1f' % s.get('throughput_img_s', float('nan')), 'alloc GiB %.2f reserved GiB %.2f' % (s['peak_allocated_bytes']/2**30, s['peak_reserved_bytes']/2**30))" "$ROOT/$label/summary.json"
done
echo "== maxbatch"
timeout 420 "$PY" -m ddlbench.cli maxbatch system=h200 framework=ddp precision=amp_bf16 model=resnet model.depth=50 \
    model.image_size=896 "run.root=$OUT/runs" --start 32 2>&1 | tee "$OUT/maxbatch.txt" | grep -v "^\[ddlbench\] maxbatch"
echo "maxbatch exit ${PIPESTATUS[0]}"
grep -h "out_of_memory\|OutOfMemory" "$OUT"/runs/maxbatch/*/end_rank0.json | head -2
