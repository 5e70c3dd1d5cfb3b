#!/usr/bin/env bash
# The predictor's whole CPU held-out set (docs/predict.md, "--validate"): every framework mode the model
# covers and one loader-bound case, each through perf/predict_cpu.py (2 and 4 namespace hosts, 100 / 300 /
# 1000 Mbit/s, calibrated just before each pair), then the `ddlbench predict --validate` line each prints,
# and one summary of every held-out run. Needs root; about 35 minutes on a quiet 2-core machine.
#   bash perf/predict_cpu_all.sh OUT            # a new folder
# Knobs: CASES (all of "ddp zero_optimizer zero3 fsdp native"), STEPS (40)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: perf/predict_cpu_all.sh OUT}
[[ -e $OUT && -n $(ls -A "$OUT" 2>/dev/null) ]] && { echo "predict_cpu_all: $OUT is not empty (never overwritten)" >&2; exit 2; }
mkdir -p "$OUT"
PY=${PYTHON:-python3}
declare -A MODE=(
    [ddp]="framework=ddp framework.bucket_cap_mb=0.25"
    [zero_optimizer]="framework=ddp framework.zero_optimizer=true framework.bucket_cap_mb=0.25"
    [zero3]="framework=deepspeed framework.zero_stage=3"
    [fsdp]="framework=fsdp"
    [native]="framework=ddp framework.bucket_cap_mb=0.25"
)
declare -A LOADER=([native]="loader=native loader.num_workers=1")
declare -A EXTRA=([native]="--jpeg 1000x750")  # large JPEGs: one worker per rank makes the ranks wait for it
for case in ${CASES:-ddp zero_optimizer zero3 fsdp native}; do
    echo "== $case" | tee -a "$OUT/summary.txt"
    "$PY" perf/predict_cpu.py --out "$OUT/$case" --mode "${MODE[$case]}" --loader "${LOADER[$case]:-loader=synthetic}" \
        --steps "${STEPS:-40}" ${EXTRA[$case]:-} > "$OUT/$case.stdout" 2> "$OUT/$case.log" || { echo "$case failed: $OUT/$case.log" | tee -a "$OUT/summary.txt"; continue; }
    tail -1 "$OUT/$case.stdout" > "$OUT/$case.command"  # the `ddlbench predict` line predict_cpu.py prints last
    read -ra predict < "$OUT/$case.command"
    "$PY" -m "${predict[@]}" --out "$OUT/$case/predicted" 2>&1 | sed -n '/# validation/,$p' | tee -a "$OUT/summary.txt"
done
echo "every case: $OUT/summary.txt"
