#!/usr/bin/env bash
# One device call (nvidia-h200): `ddlbench maxbatch` extrapolating (the default since 2026-12-03) beside the
# doubling search it replaced, for ResNet-50 (DDP, bf16) and BERT-large (DDP, bf16, seq 384, AdamW).
# The doubling search from batch 1 takes about 26 probes for ResNet-50 (over 8 minutes), so it runs here
# only in the bracket the new search left (--start fit --max oom, exact to 1), which confirms the boundary; it runs
# last, in what is left of BUDGET_S (480 s; at most 170 s, skipped under 60 s), so the two timed searches come first.
# Each search is capped at CAP_S (170) s by `timeout`. The log names the checksums of ddlbench/maxbatch.py and cli.py (compare
# with `git show <commit>:ddlbench/maxbatch.py | sha256sum`) and $SRC_COMMIT where the caller sets it.
# Knobs: SEARCHES ("resnet50 bert_large") CAP_S (170) BUDGET_S (480). The log is appended to $OUT/log.txt.
# Carry [".devwheels/base", ".devwheels/nlp"]. Results: docs/results/2026-12-03-h200-maxbatch.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source perf/device_env.sh
"$PY" -c 'import transformers' 2>/dev/null || timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/nlp/*.whl
echo "code: commit ${SRC_COMMIT:-unknown}"; sha256sum ddlbench/maxbatch.py ddlbench/cli.py
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
[[ " ${SEARCHES:-resnet50 bert_large} " == *" resnet50 "* ]] && search resnet50_new "${CAP_S:-170}" "${RESNET[@]}" --campaign resnet_new
[[ " ${SEARCHES:-resnet50 bert_large} " == *" bert_large "* ]] && search bert_large_new "${CAP_S:-170}" "${BERT[@]}" --campaign bert_new
read -r fit oom < <(sed -n 's/^largest per-GPU batch that fits: \([0-9]*\); \([0-9]*\) is out of memory.*/\1 \2/p' "$OUT/resnet50_new.txt" 2>/dev/null)
left=$(( ${BUDGET_S:-480} - SECONDS ))
if [[ -z "${fit:-}" ]]; then
    echo "== resnet50_doubling_in_bracket: skipped, no bracket from resnet50_new"
elif (( left < 60 )); then
    echo "== resnet50_doubling_in_bracket: skipped, ${left} s of BUDGET_S left"
else
    search resnet50_doubling_in_bracket $(( left < 170 ? left : 170 )) "${RESNET[@]}" --doubling --resolution 0 \
        --start "$fit" --max "$oom" --campaign resnet_old
fi
} 2>&1 | tee -a "$OUT/log.txt"
rm -rf "$OUT/runs"  # the probes' run directories: their figures are in the logs
