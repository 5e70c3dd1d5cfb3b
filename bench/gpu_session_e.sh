#!/usr/bin/env bash
# One device call (nvidia-h200), 2026-12-02, the session's last device minutes: issue 21's native_gpu with
# nvImageCodec's hardware decoder beside torchvision's and synthetic/native (no DALI: its staging did not fit),
# then the DDP side of BERT-large's maxbatch in the bracket the FSDP search left (fits 320, OOM 352).
# Carry [".devwheels/nvimgcodec", ".devwheels/base", ".devwheels/nlp"].
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
VARIANTS="synthetic native_gpu_torchvision native_gpu_nvimgcodec native" LOADERBENCH=0 BUDGET_S=260 STEPS=40 \
    bash bench/loaders_hw_gpu.sh > "$OUT/loaders.txt" 2>&1
grep -E "^RESULT|^PROBE|== " "$OUT/loaders.txt"
{
source bench/device_env.sh
"$PY" -c 'import transformers' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/nlp/*.whl
echo "== maxbatch bert_large framework=ddp"
timeout -k 10 150 "$PY" -m ddlbench.cli maxbatch system=h200 precision=amp_bf16 loader=synthetic model=bert model.size=large \
    optim.name=adamw optim.lr=3e-5 optim.weight_decay=0.01 run.trace=off "run.root=$OUT/runs" framework=ddp \
    --start 320 --max 352 --campaign maxbatch_ddp 2>&1 | grep -v "^\[ddlbench\] maxbatch"
echo "maxbatch rc ${PIPESTATUS[0]}"
} 2>&1 | tee "$OUT/maxbatch.txt"
rm -rf "$OUT/runs"
