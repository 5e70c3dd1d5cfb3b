#!/usr/bin/env bash
# One device call (nvidia-h200): the sampled trace breakdown, on by default on GPUs.
#   1. its overhead: ResNet-50 bf16 b256 with the window (run.trace=auto) and without (run.trace=off),
#      alternating, ROUNDS pairs; the window's steps are not measured, so the ratio is what it costs the
#      measured ones (goal >= 0.99);
#   2. the breakdown for DDP (wrapped on one GPU, so its all-reduce runs), Horovod and DeepSpeed x ResNet-50
#      and ResNet-152, synthetic data: the report's trace tables (both denominators, the seed's layout,
#      timers against trace); the sampled window records device activity only;
#   3. for contrast, ResNet-152 with an explicit window (run.profile_steps), which records the host ops too.
# Carry [".devwheels/base", ".devwheels/deepspeed", ".devwheels/horovod"] (tools/fetch_*_device_inputs.sh):
# DeepSpeed is installed from its wheel, Horovod built with NCCL there (about 2 minutes on 16 cores).
#   bash perf/trace_gpu.sh      (logs and the report under $OUT)
# Knobs: ROUNDS (3) WARMUP (20) STEPS (100) MODELS ("50 152") FRAMEWORKS ("ddp horovod deepspeed")
#        HOST_OPS_FRAMEWORKS ("horovod"; "" for none)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
FRAMEWORKS=${FRAMEWORKS:-ddp horovod deepspeed}
HOST_OPS_FRAMEWORKS=${HOST_OPS_FRAMEWORKS:-horovod}
if [[ " $FRAMEWORKS " == *" deepspeed "* ]] && ! "$PY" -c 'import deepspeed' 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/deepspeed/*.whl
fi
if [[ " $FRAMEWORKS " == *" horovod "* ]]; then
    start=$SECONDS
    HOROVOD_INPUTS=$PWD/.devwheels/horovod HOROVOD_TARGET=$SITE HOROVOD_OPS=nccl tools/build_horovod.sh "$PY" \
        > "$OUT/horovod_build.log" 2>&1 || { echo "horovod build failed:"; tail -5 "$OUT/horovod_build.log"; }
    echo "horovod build + install: $((SECONDS - start)) s"
fi
ROOT=$OUT/runs
COMMON=(system=h200 precision=amp_bf16 model=resnet run.per_gpu_batch=256 "run.warmup_steps=${WARMUP:-20}"
        "run.steps=${STEPS:-100}" run.log_every=0 "run.root=$ROOT")
run() { "$PY" -m ddlbench run "${COMMON[@]}" "$@" 2>&1 | grep -E "done:|rror" | sed 's/ -> .*//'; }

echo "== overhead: the sampled window (run.trace=auto) against none (run.trace=off), alternating"
for round in $(seq 0 $(( ${ROUNDS:-3} - 1 ))); do
    echo "round $round"
    run run.campaign=overhead model.depth=50 "run.repeat=$round"
    run run.campaign=overhead model.depth=50 run.trace=off "run.repeat=$round"
done

echo "== breakdown: frameworks x models, the sampled window"
for depth in ${MODELS:-50 152}; do
    for fw in $FRAMEWORKS; do
        extra=()
        [[ $fw == ddp ]] && extra=(framework.wrap_single_rank=true)
        echo "$fw resnet$depth"
        run run.campaign=breakdown "framework=$fw" "model.depth=$depth" "${extra[@]}"
    done
done

echo "== the same with host ops recorded (an explicit window inside the measured steps), for contrast"
for fw in $HOST_OPS_FRAMEWORKS; do
    w=${WARMUP:-20}
    echo "$fw resnet152, run.profile_steps=[$((w + 10)),$((w + 14))]"
    run run.campaign=host_ops "framework=$fw" model.depth=152 "run.profile_steps=[$((w + 10)),$((w + 14))]"
done

"$PY" - "$ROOT" <<'EOF'
import json, statistics, sys
from pathlib import Path

root = Path(sys.argv[1])
on, off = [], []
for d in sorted((root / "overhead").iterdir()):
    s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    if s.get("status") != "completed":
        continue
    cfg = (d / "config.yaml").read_text()
    (off if "trace: 'off'" in cfg or "trace: off" in cfg else on).append(s["throughput_img_s"])
    reduce = [json.loads(p.read_text())["reduce_s"] for p in d.glob("breakdown_rank*.json")]
    print(f"{d.name}: {s['throughput_img_s']:,.1f} img/s, runtime {s.get('runtime_s', 0):.1f} s"
          + (f", trace reduced in {reduce[0]:.2f} s" if reduce else ", no window"))
if on and off:
    print(f"RESULT window/none: median {statistics.median(on):,.1f} / {statistics.median(off):,.1f} img/s = "
          f"{statistics.median(on) / statistics.median(off):.4f} (pairs: "
          + ", ".join(f"{a / b:.4f}" for a, b in zip(on, off)) + ")")
EOF
echo "== report (trace tables)"
for campaign in breakdown host_ops; do
    [[ -d $ROOT/$campaign ]] || continue
    "$PY" -m ddlbench report "$ROOT/$campaign" --out "$OUT/report_$campaign" --formats png --reference aach2023 2>&1 | tail -1
    sed -n '/^## Where the time goes: the trace window/,/^## Step-time/p' "$OUT/report_$campaign/report.md" | grep -v "^!\|^_" | head -80
done
