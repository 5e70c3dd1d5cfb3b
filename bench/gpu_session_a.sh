#!/usr/bin/env bash
# Device call A (after the DALI parts were received into /tmp/stage): install the carried wheels, then
# the foundation proof (harness overhead), Horovod (NCCL build + runs) and DeepSpeed, logs into $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out} NCCL_NVLS_ENABLE=0
mkdir -p "$OUT" /tmp/site
bash .devwheels/stage-wheels.sh install .devwheels/dali >/dev/null 2>&1 && echo "DALI installed"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .devwheels/deepspeed/*.whl  # holds hydra-core, omegaconf, antlr4, tqdm too 2>&1 | grep -iv warning
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
echo "== harness overhead"; python3 bench/harness_overhead.py --rounds 3 2>&1 | grep -E "^round|RESULT" | tee "$OUT/harness.txt"
python3 bench/harness_overhead.py --rounds 2 framework.wrap_single_rank=true 2>&1 | grep -E "^round|RESULT" | tee -a "$OUT/harness.txt"
echo "== horovod"; bash bench/horovod_gpu.sh 2>&1 | tail -25 | tee "$OUT/horovod.txt"
echo "== deepspeed"; bash bench/deepspeed_gpu.sh 2>&1 | tail -25 | tee "$OUT/deepspeed.txt"
