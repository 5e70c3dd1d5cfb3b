#!/usr/bin/env bash
# One device call (nvidia-h200): `ddlbench maxbatch` extrapolating (the default since 2026-12-03) beside the
# doubling search it replaced, for ResNet-50 (DDP, bf16) and BERT-large (DDP, bf16, seq 384, AdamW).
# The doubling search from batch 1 takes about 26 probes for ResNet-50 (over 8 minutes), so it runs here
# only in the bracket the new search left (--start fit --max oom, exact to 1), which confirms the boundary.
# Carry [".devwheels/base", ".devwheels/nlp"]. Results: docs/results/2026-12-03-h200-maxbatch.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source bench/device_env.sh
"$PY" -c 'import transformers' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/nlp/*.whl
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
RESNET=(system=h200 framework=ddp precision=amp_bf16 model=resnet model.depth=50 "run.root=$OUT/runs")
BERT=(system=h200 framework=ddp precision=amp_bf16 loader=synthetic model=bert model.size=large optim.name=adamw
      optim.lr=3e-5 optim.weight_decay=0.01 "run.root=$OUT/runs")
search() {  # search LABEL TIMEOUT_S ARGS...: one maxbatch, its table and answer, its wall time
    local label=$1 limit=$2; shift 2
    echo "== $label: maxbatch $*"
    local start=$SECONDS
    timeout -k 10 "$limit" "$PY" -m ddlbench.cli maxbatch "$@" 2>&1 | grep -v "^\[ddlbench\] maxbatch" | tee "$OUT/$label.txt"
    echo "== $label: rc ${PIPESTATUS[0]}, wall $((SECONDS - start)) s"
}
search resnet50_new 170 "${RESNET[@]}" --campaign resnet_new
read -r fit oom < <(sed -n 's/^largest per-GPU batch that fits: \([0-9]*\); \([0-9]*\) is out of memory.*/\1 \2/p' "$OUT/resnet50_new.txt")
if [[ -n "${fit:-}" ]]; then
    search resnet50_doubling_in_bracket 170 "${RESNET[@]}" --doubling --resolution 0 --start "$fit" --max "$oom" --campaign resnet_old
fi
search bert_large_new 170 "${BERT[@]}" --campaign bert_new
} 2>&1 | tee "$OUT/log.txt"
rm -rf "$OUT/runs"  # the probes' run directories: their figures are in the logs
