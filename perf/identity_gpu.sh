#!/usr/bin/env bash
# One device call (nvidia-h200): run identity and the one throughput definition on a GPU.
#   ResNet-50, bf16, batch 256 on one H200: a run with a profiler window (steps 30-34), the same
#   settings without it (another cell: run.profile_steps is a setting), a repeat of that, and fp32;
#   then summary.json, `ddlbench results`, `report` and `compare` side by side. Carry .devwheels/base.
#   bash perf/identity_gpu.sh      (logs and the report under $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
ROOT=$OUT/runs
COMMON=(system=h200 precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=256 run.warmup_steps=10
        run.steps=60 run.log_every=0 "run.root=$ROOT" run.campaign=identity)
run() { echo "== $*"; "$PY" -m ddlbench.cli run "${COMMON[@]}" "$@" 2>&1 | grep -E "done:|rror" ; }
run "run.profile_steps=[30,34]"
run
run run.repeat=1
run precision=fp32
echo "== summaries (throughput_img_s from the rank logs; wall_s for reference)"
for s in "$ROOT"/identity/*/summary.json; do
    "$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-2], s['status'],
    round(s['throughput_img_s'],1), 'img/s over', s['measured_steps'], 'steps; wall', round(s['wall_s'],2), 's ->',
    round(s['measured_samples']/s['wall_s'],1), 'img/s by wall time')" "$s"
done
echo "== ddlbench results"
"$PY" -m ddlbench.cli results "$ROOT" 2>&1 | grep -v "^ddlbench: warning"
echo "== ddlbench report (throughput table)"
"$PY" -m ddlbench.cli report "$ROOT" --out "$OUT/report" --formats png --jobs 4 2>&1 | tail -1
sed -n '/^## Throughput/,/^## Where/p' "$OUT/report/report.md" | grep "^|"
echo "== ddlbench compare runs runs"
"$PY" -m ddlbench.cli compare "$ROOT" "$ROOT"; echo "compare exit $?"
