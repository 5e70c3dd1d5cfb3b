#!/usr/bin/env bash
# One device call (nvidia-h200), 2026-12-02: RetinaNet x FSDP2 bf16 again (BatchNorm now kept in fp32 under
# the bf16 policy), then `ddlbench maxbatch` for BERT-large (seq 384, bf16, AdamW) without sharding (DDP)
# and with it (FSDP2 full shard). One GPU: FSDP has a single rank to shard over, so the two searches show
# what sharding costs or saves on one GPU, not the multi-GPU gain. Carry [".devwheels/nlp", ".devwheels/deepspeed"].
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source bench/device_env.sh
"$PY" -c 'import transformers' 2>/dev/null || "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/nlp/*.whl
date -u +"%Y-%m-%dT%H:%M:%SZ"
start=$SECONDS
timeout -k 20 120 "$PY" -m ddlbench.cli run system=h200 precision=amp_bf16 loader=synthetic model=retinanet optim.lr=0.01 \
    run.per_gpu_batch=16 framework=fsdp run.warmup_steps=5 run.steps=15 run.log_every=0 run.trace=off \
    "run.dir=$OUT/tasks_gpu/retinanet-fsdp-g1" 2>&1 | grep -E "done:|rror" | tail -3
echo "== retinanet fsdp: wall $((SECONDS - start)) s"
BERT=(system=h200 precision=amp_bf16 loader=synthetic model=bert model.size=large optim.name=adamw optim.lr=3e-5
      optim.weight_decay=0.01 run.trace=off "run.root=$OUT/runs")
for fw in ddp fsdp; do
    start=$SECONDS
    echo "== maxbatch bert_large framework=$fw"
    timeout -k 20 230 "$PY" -m ddlbench.cli maxbatch "${BERT[@]}" framework=$fw --start 128 --max 1024 --campaign maxbatch_$fw 2>&1 \
        | grep -v "^\[ddlbench\] maxbatch"
    echo "== maxbatch $fw: rc ${PIPESTATUS[0]}, wall $((SECONDS - start)) s"
done
} 2>&1 | tee "$OUT/log.txt"
rm -rf "$OUT/runs"  # the probes' run directories: their figures are in log.txt
