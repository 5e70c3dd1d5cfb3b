#!/usr/bin/env bash
# One device call (nvidia-h200): `ddlbench maxbatch` on one GPU (its probes in one process since 2026-12-03,
# evening), for ResNet-50 (DDP, bf16), BERT-large (DDP, bf16, seq 384, AdamW) and ResNet-50 under FSDP2; then,
# in what is left of BUDGET_S (480 s), the doubling search exact to 1 inside each bracket the DDP searches
# left (--doubling --resolution 0 --start fit --max oom), which confirms the answer. FRESH=1 adds
# --fresh-processes to every search (each probe a fresh `ddlbench run`: the search before). Each search is
# capped at CAP_S (170) s by `timeout`. The log names the checksums of ddlbench/maxbatch.py, cli.py and
# launchers/lifecycle/rank.py, and $SRC_COMMIT where the caller sets it.
# Knobs: SEARCHES ("resnet50 bert_large fsdp_resnet50") CAP_S (170) BUDGET_S (480) FRESH (0).
# The log is appended to $OUT/log.txt. Carry [".devwheels/base", ".devwheels/nlp"].
# Results: docs/results/2026-12-03-h200-maxbatch.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source perf/device_env.sh
with_wheels transformers nlp
echo "code: commit ${SRC_COMMIT:-unknown}"; sha256sum ddlbench/maxbatch.py ddlbench/cli.py launchers/lifecycle/rank.py
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
WAY=(); [[ "${FRESH:-0}" == 1 ]] && WAY=(--fresh-processes)
RESNET=(system=h200 framework=ddp precision=amp_bf16 model=resnet model.depth=50 "run.root=$OUT/runs")
BERT=(system=h200 framework=ddp precision=amp_bf16 loader=synthetic model=bert model.size=large optim.name=adamw
      optim.lr=3e-5 optim.weight_decay=0.01 "run.root=$OUT/runs")
FSDP=(system=h200 framework=fsdp precision=amp_bf16 model=resnet model.depth=50 "run.root=$OUT/runs")
search() {  # search LABEL TIMEOUT_S ARGS...: one maxbatch, its table and answer, its wall time
    local label=$1 limit=$2; shift 2
    echo "== $label: maxbatch $*"
    local start=$SECONDS
    timeout -k 10 "$limit" "$PY" -m ddlbench.cli maxbatch "$@" 2>&1 | grep -v "^\[ddlbench\] maxbatch" | tee "$OUT/$label.txt"
    echo "== $label: rc ${PIPESTATUS[0]}, wall $((SECONDS - start)) s"
}
asked() { [[ " ${SEARCHES:-resnet50 bert_large fsdp_resnet50} " == *" $1 "* ]]; }
asked resnet50 && search resnet50 "${CAP_S:-170}" "${RESNET[@]}" "${WAY[@]}" --campaign resnet
asked bert_large && search bert_large "${CAP_S:-170}" "${BERT[@]}" "${WAY[@]}" --campaign bert
asked fsdp_resnet50 && search fsdp_resnet50 "${CAP_S:-170}" "${FSDP[@]}" "${WAY[@]}" --campaign fsdp
confirm() {  # confirm LABEL ARGS...: the doubling search exact to 1 in LABEL's bracket, in what is left
    local label=$1 fit oom; shift
    read -r fit oom < <(sed -n 's/^largest per-GPU batch that fits: \([0-9]*\); \([0-9]*\) is out of memory.*/\1 \2/p' "$OUT/$label.txt" 2>/dev/null)
    local left=$(( ${BUDGET_S:-480} - SECONDS ))
    if [[ -z "${fit:-}" ]]; then
        echo "== ${label}_doubling_in_bracket: skipped, no bracket from $label"
    elif (( left < 40 )); then
        echo "== ${label}_doubling_in_bracket: skipped, ${left} s of BUDGET_S left"
    else
        search "${label}_doubling_in_bracket" $(( left < 170 ? left : 170 )) "$@" "${WAY[@]}" --doubling --resolution 0 \
            --start "$fit" --max "$oom" --campaign "${label}_exact"
    fi
}
confirm resnet50 "${RESNET[@]}"
confirm bert_large "${BERT[@]}"
} 2>&1 | tee -a "$OUT/log.txt"
rm -rf "$OUT/runs"  # the probes' run directories: their figures are in the logs
