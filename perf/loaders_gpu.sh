#!/usr/bin/env bash
# One device call (nvidia-h200): the loaders side by side on the same JPEGs (4,096 of 500x375, ~97 KB:
# quality 94), ResNet-50 bf16 batch 256 on one GPU:
#   1. `ddlbench loaderbench`: each loader alone at 2, 8 and 15 workers/threads, and the decode ceilings;
#   2. training fed by synthetic, DALI, native (the fair default: the rank's CPUs less one) and native_gpu
#      (nvJPEG on the GPU) once per loader.cpu_decode_share of NG_SHARES (the share of each batch its
#      DataLoader workers decode on the CPU), ROUNDS interleaved rounds, and native at the old default of
#      2 workers once;
#      ratios to synthetic (goals: native_gpu >= 0.90, native >= 0.35); the report's loader settings and
#      trace window (DALI's copies and idle, issue 17).
# DALI: stage .devwheels/dali-slim/part.00 .. part.02 into /tmp/stage in three calls before this one
# (each: carry [".devwheels/dali-slim/part.0N"], command: mkdir -p /tmp/stage && cp .devwheels/dali-slim/part.0N /tmp/stage/),
# then carry [".devwheels/dali-slim/part.03", ".devwheels/base"] here. Without DALI its cases are skipped.
#   bash perf/loaders_gpu.sh      (runs, loaderbench and the report under $OUT)
# Knobs: ROUNDS (2) WARMUP (15) STEPS (60) LB_WORKERS (2,8,15) OLD_DEFAULT (1: also native at 2 workers)
#        TRAIN_LOADERS ("synthetic dali native native_gpu") LB_LOADERS_ONLY (loaderbench's --loaders)
#        NG_SHARES ("0": native_gpu's loader.cpu_decode_share values, one training run each per round; "0 0.25 0.4"
#        measured 0.876 / 0.729 / 0.619 of synthetic, docs/results/2026-12-01-h200-eval.md, and runs past one call)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
tools/dali_slim.sh install 2>&1 | tail -1
LOADERS=(synthetic native native_gpu)
LB_LOADERS=native,native_gpu
if "$PY" -c 'import nvidia.dali' 2>/dev/null; then
    LOADERS=(synthetic dali native native_gpu)
    LB_LOADERS=native,native_gpu,dali,dali-tfrecord
else
    echo "DALI does not import: its cases are skipped"
fi
[[ -n ${TRAIN_LOADERS:-} ]] && read -ra LOADERS <<< "$TRAIN_LOADERS"
LB_LOADERS=${LB_LOADERS_ONLY:-$LB_LOADERS}
read -ra NG_SHARES <<< "${NG_SHARES:-0}"
DATA=/tmp/ddl_jpeg
[[ -d $DATA ]] || "$PY" perf/dali_gpu.py --data "$DATA" --make-data 4096 --quality 94 --only data
"$PY" -c "import os, sys; s = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(sys.argv[1]) for f in fs]; print(f'{len(s)} JPEGs, mean {sum(s) / len(s) / 1e3:.0f} KB')" "$DATA"

echo "== loaders alone"
"$PY" -m ddlbench loaderbench system=h200 "data.path=$DATA" run.per_gpu_batch=256 --loaders "$LB_LOADERS" \
    --tfrecord "${DATA}_tfrecord" --workers "${LB_WORKERS:-2,8,15}" --batches 10 --warmup 3 --out "$OUT/loaderbench" 2>&1 \
    | grep -v "^\[ddlbench\] loaderbench \|Warning\|warn("

ROOT=$OUT/runs
COMMON=(system=h200 precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=256 "run.warmup_steps=${WARMUP:-15}"
        "run.steps=${STEPS:-60}" run.log_every=0 "run.root=$ROOT" run.campaign=loaders "data.path=$DATA")
run() { "$PY" -m ddlbench run "${COMMON[@]}" "$@" 2>&1 | grep -E "done:|rror|warning" | sed 's/ -> .*//'; }
echo "== training, interleaved rounds"
for round in $(seq 0 $(( ${ROUNDS:-2} - 1 ))); do
    for loader in "${LOADERS[@]}"; do
        if [[ $loader == native_gpu ]]; then
            for share in "${NG_SHARES[@]}"; do
                echo "round $round $loader cpu_decode_share=$share"
                run "loader=$loader" "loader.cpu_decode_share=$share" "run.repeat=$round"
            done
            continue
        fi
        echo "round $round $loader"
        run "loader=$loader" "run.repeat=$round"
    done
done
if [[ ${OLD_DEFAULT:-1} == 1 ]]; then
    echo "native at the old default, 2 workers"
    run loader=native loader.num_workers=2
fi

"$PY" - "$ROOT/loaders" <<'PY'
import json, statistics, sys
from pathlib import Path

import yaml

by = {}
for d in sorted(Path(sys.argv[1]).iterdir()):
    s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    if s.get("status") != "completed":
        print(f"{d.name}: {s.get('status', 'no summary')}")
        continue
    loader = yaml.safe_load((d / "config.yaml").read_text())["loader"]
    share = loader.get("cpu_decode_share") if s["loader"] == "native_gpu" else None
    label = s["loader"] + (" (2 workers)" if s["loader"] == "native" and loader["num_workers"] == 2 else "")
    label += f" cpu {share:g}" if share is not None else ""
    by.setdefault((s["loader"], -1.0 if share is None else share, label), []).append(s["throughput_img_s"])
ratios = {}
base = statistics.median(next(v for k, v in by.items() if k[2] == "synthetic"))
for (_, share, label), values in sorted(by.items()):  # native_gpu's shares side by side, in order
    m = statistics.median(values)
    ratios[label] = m / base
    print(f"RESULT train resnet50 bf16 b256 1xH200 {label:<22} {m:>8,.1f} img/s  ratio {m / base:.3f}  "
          f"runs {', '.join(f'{v:,.1f}' for v in values)}")
shares = [(label.split(" cpu ")[1], r) for label, r in ratios.items() if label.startswith("native_gpu cpu ")]
if shares:
    print("RESULT native_gpu ratio by loader.cpu_decode_share: " + ", ".join(f"{v} -> {r:.3f}" for v, r in shares)
          + " (goal >= 0.90)")
PY
echo "== report"
"$PY" -m ddlbench report "$ROOT/loaders" --out "$OUT/report" --formats png 2>&1 | tail -1
sed -n '/^Each loader.s settings/,/^## Throughput/p' "$OUT/report/report.md" | grep "^|"
sed -n '/^## Where the time goes: the trace window/,/^The same as shares/p' "$OUT/report/report.md" | grep "^|"
grep -A3 "^Timers and trace" "$OUT/report/report.md" | head -3
