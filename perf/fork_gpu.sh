#!/usr/bin/env bash
# One device call (nvidia-h200): torchrun started as a fork of `ddlbench run` (launchers/supervise.py) and
# the adapters that now keep their typed config (native, native_gpu, DeepSpeed) on a GPU.
#   1. perf/launch_fork.py on the GPU: the launcher as a fresh process vs as a fork, ROUNDS alternating;
#   2. ResNet-50 bf16 fed by native and native_gpu on synthesized JPEGs, with a validation split (the
#      loaders' for_split: no augmentation, no shuffle), and DeepSpeed ZeRO-1 on synthetic data.
# Carry .devwheels/deepspeed (DeepSpeed and ddlbench's pure-python requirements for CPython 3.12).
#   bash perf/fork_gpu.sh      (runs under $OUT)
# Knobs: ROUNDS (3) STEPS (30)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
with_deepspeed
machine_lines

echo "== the launcher as a fork, on the GPU (simple_cnn, 1 rank)"
"$PY" perf/launch_fork.py --rounds "${ROUNDS:-3}" --ranks 1 system=h200 2>&1 | tail -8

DATA=/tmp/ddl_synth
[[ -d $DATA ]] || "$PY" -m ddlbench data synth --out "$DATA" --classes 8 --per-class 160 --width 320 --height 240 --quiet
ROOT=$OUT/runs
COMMON=(system=h200 precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=64 run.warmup_steps=5
        "run.steps=${STEPS:-30}" run.log_every=0 "run.root=$ROOT" run.campaign=fork)
run_one() {
    echo "== $*"
    local start=$SECONDS
    "$PY" -m ddlbench run "${COMMON[@]}" "$@" 2>&1 | grep -E "^\[ddlbench\] /|done:|rror|deepspeed ZeRO|val" | sed 's/ -> .*//'
    echo "   wall $((SECONDS - start)) s"
}
run_one loader=synthetic
run_one loader=native "data.path=$DATA" data.val_split=0.2 run.eval_every_epochs=1
run_one loader=native_gpu "data.path=$DATA" data.val_split=0.2 run.eval_every_epochs=1
run_one loader=synthetic framework=deepspeed framework.zero_stage=1
echo "== the runs' loader and framework records"
"$PY" - "$ROOT" <<'EOF'
import json, sys
from pathlib import Path
for meta in sorted(Path(sys.argv[1]).glob("fork/*/meta.json")):
    m = json.loads(meta.read_text())
    loader, fw = m.get("loader", {}), m.get("framework", {})
    keep = {k: loader.get(k) for k in ("loader", "augment", "shuffle", "num_workers", "gpu_decoder")}
    print(meta.parent.name, keep, {k: fw.get(k) for k in ("framework", "zero_stage", "reduce_note")})
EOF
