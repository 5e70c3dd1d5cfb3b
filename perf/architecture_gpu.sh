#!/usr/bin/env bash
# One device call (nvidia-h200): the architecture passes keep behaviour on a GPU.
#   - `ddlbench doctor` through every adapter's installation() probe;
#   - the harness against a bare loop (perf/harness_overhead.py: ResNet-50, bf16, batch 256, ROUNDS rounds);
#   - `ddlbench run` through the registered torchrun builder (bf16 with its sampled trace window, and fp32:
#     two cells), commbench through the same builders (the Collective protocol, torch.distributed's);
#   - `results`, `report` (every analysis module's section on GPU logs) and `compare` of the campaign with itself.
# Carry .devwheels/base (hydra-core, omegaconf, antlr4, pyyaml, tqdm for CPython 3.12).
#   bash perf/architecture_gpu.sh      (logs under $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
"$PY" -c "import torch; print('torch', torch.__version__)"
echo "== ddlbench doctor"
"$PY" -m ddlbench doctor; echo "doctor exit $?"
echo "== harness overhead"
"$PY" perf/harness_overhead.py --depth 50 --batch 256 --precision amp_bf16 --system h200 --rounds "${ROUNDS:-5}" 2>&1 \
    | grep -E "^round|^RESULT"
echo "== ddlbench run (registered torchrun builder): bf16, then fp32"
for precision in amp_bf16 fp32; do
    "$PY" -m ddlbench run system=h200 precision=$precision model=resnet model.depth=50 run.per_gpu_batch=256 \
        run.warmup_steps=10 run.steps=40 run.log_every=0 "run.root=$OUT/runs" run.campaign=arch 2>&1 \
        | grep -E "^\[ddlbench\] /|done:|rror"
done
echo "== ddlbench commbench (same builders)"
"$PY" -m ddlbench commbench --nproc 1 --max-bytes 268435456 --no-gpu-tests --out "$OUT/commbench.json" 2>&1 | tail -4
echo "== ddlbench results / report / compare"
"$PY" -m ddlbench results "$OUT/runs" 2>&1 | grep -v "^ddlbench: warning"
"$PY" -m ddlbench report "$OUT/runs" --out "$OUT/report" --formats png --jobs 4 2>&1 | tail -2
grep "^## " "$OUT/report/report.md"
ls "$OUT/report/figures"
"$PY" -m ddlbench compare "$OUT/runs" "$OUT/runs" | tail -3; echo "compare exit $?"
