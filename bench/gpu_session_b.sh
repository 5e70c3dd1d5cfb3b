#!/usr/bin/env bash
# Device session B, in the call that carries the last DALI part: install the carried wheels, then
#   b1: breakdown (timers vs trace, telemetry, commbench, harness overhead)
#   b2: DALI vs native vs synthetic, and DeepSpeed vs DDP
# logs into $OUT. Usage: bash bench/gpu_session_b.sh b1|b2
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out} NCCL_NVLS_ENABLE=0
mkdir -p "$OUT" /tmp/site
if [[ ! -e /tmp/site/.ddlbench_ok ]]; then
    bash .devwheels/stage-wheels.sh install .devwheels/dali >/dev/null 2>&1 && echo "DALI installed"
    # the deepspeed set holds hydra-core, omegaconf, antlr4 and tqdm too
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .devwheels/deepspeed/*.whl 2>&1 | grep -iv warning
    touch /tmp/site/.ddlbench_ok
fi
export PYTHONPATH=$PWD:/tmp/site
case "${1:?b1|b2}" in
  b1) bash bench/breakdown_gpu.sh 2>&1 | tee "$OUT/breakdown.txt" | tail -60 ;;
  b2) python3 bench/dali_gpu.py --data /tmp/ddl_jpeg --make-data 4096 --json "$OUT/dali.json" 2>&1 | grep -v "^\[ddlbench\] step" | tee "$OUT/dali.txt" | tail -30
      STEPS=60 bash bench/deepspeed_gpu.sh 2>&1 | tee "$OUT/deepspeed.txt" | tail -14 ;;
esac
