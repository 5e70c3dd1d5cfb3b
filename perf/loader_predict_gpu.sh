#!/usr/bin/env bash
# One device call (nvidia-h200): what `ddlbench predict` needs to model the native loader and DALI on another
# machine, and the 1-GPU runs that check it (docs/predict.md, "The loaders"):
#   1. `ddlbench loaderbench`: native and DALI alone on 4,096 real JPEGs (500x375, ~97 KB), ResNet-50's batch
#      64 at 224 px, at 4 workers/threads (a loader the GPU waits for) and 11 (JUWELS Booster's default: 12
#      CPUs per rank less one), with the seconds between batches the predictor draws from;
#   2. ResNet-50 amp_bf16 batch 64 on one GPU, `system.cpus_per_rank=12` (a JUWELS rank's CPUs), ROUNDS
#      interleaved rounds: fed by the synthetic loader (the calibration), by native (11 and 4 workers) and by
#      DALI (held out: predicted from the calibration and loaderbench's rows, then compared). The run
#      directories come back as runs.tar.gz.
# DALI: stage .devwheels/dali-slim/part.00 .. part.02 into /tmp/stage in three calls before this one
# (each: carry [".devwheels/dali-slim/part.0N"], command: mkdir -p /tmp/stage && cp .devwheels/dali-slim/part.0N /tmp/stage/),
# then carry [".devwheels/dali-slim/part.03", ".devwheels/base"] here. Without DALI its cases are skipped.
#   bash perf/loader_predict_gpu.sh      (loaderbench/ and runs/ under $OUT)
# Knobs: STEPS (100) WARMUP (20) LB_BATCHES (200) ROUNDS (2) LB (1: run loaderbench)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
machine_lines
tools/dali_slim.sh install 2>&1 | tail -1
CASES=native
LOADERS=(synthetic native native4)
if "$PY" -c 'import nvidia.dali' 2>/dev/null; then
    CASES=native,dali
    LOADERS=(synthetic native native4 dali)
else
    echo "DALI does not import: its cases are skipped"
fi
DATA=/tmp/ddl_jpeg
[[ -d $DATA ]] || "$PY" perf/dali_gpu.py --data "$DATA" --make-data 4096 --quality 94 --only data
nproc

if [[ ${LB:-1} == 1 ]]; then
    echo "== loaders alone"
    "$PY" -m ddlbench loaderbench system=h200 model=resnet model.depth=50 "data.path=$DATA" run.per_gpu_batch=64 \
        --loaders "$CASES" --workers 4,11 --batches "${LB_BATCHES:-200}" --warmup 5 --out "$OUT/loaderbench" 2>&1 \
        | grep -v "^\[ddlbench\] loaderbench \|Warning\|warn("
fi

ROOT=/tmp/loader_runs  # many files: they come back as one tarball
rm -rf "$ROOT"
COMMON=(system=h200 system.cpus_per_rank=12 precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=64
        "run.warmup_steps=${WARMUP:-20}" "run.steps=${STEPS:-100}" run.log_every=0 "data.path=$DATA")
for round in $(seq 0 $(( ${ROUNDS:-2} - 1 ))); do
    for loader in "${LOADERS[@]}"; do
        if [[ $loader == native4 ]]; then
            run_cell "native-w4-r$round" loader=native loader.num_workers=4 "run.repeat=$round"
        else
            run_cell "$loader-r$round" "loader=$loader" "run.repeat=$round"
        fi
    done
done
"$PY" -m ddlbench results "$ROOT" 2>&1 | tail -8
tar czf "$OUT/runs.tar.gz" -C "$(dirname "$ROOT")" "$(basename "$ROOT")"
