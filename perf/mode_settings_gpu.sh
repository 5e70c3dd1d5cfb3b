#!/usr/bin/env bash
# Issue 35 (items 2-3): a mode's settings side by side with DDP on one H200 (offline: python 3.12, torch 2.11
# cu130). Per model (BERT-large QA, batch 32, seq 384, AdamW; ResNet-50, batch 256), bf16, synthetic data: DDP,
# then each mode of MODES (below: DeepSpeed's overlap_comm at ZeRO-2/3, FSDP2's reshard, unit and precision).
# Carry [".devwheels/deepspeed", ".devwheels/nlp"]:
#   bash perf/mode_settings_gpu.sh                                        # overlap_comm (the default MODES)
#   MODES="fsdp fsdp_keep fsdp_root fsdp_autocast" bash perf/mode_settings_gpu.sh
# Prints each run's done line and wall time, then a table: samples/s (throughput_img_s) and the ratio to DDP.
# Knobs: WARMUP (10) STEPS (30) MODELS ("bert_large resnet50") MODES ("z3_off z3_default z2_on"; DDP always runs
# first) BUDGET_S (480: no run starts after it) CAP_S (120)
# Results: docs/results/2026-12-03-h200-frameworks.md ("overlap_comm", "FSDP2's settings on one GPU")
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source perf/device_env.sh
with_deepspeed
with_wheels transformers nlp
machine_lines
WARMUP=${WARMUP:-10} STEPS=${STEPS:-30} CAP_S=${CAP_S:-120}
ROOT=$OUT/modes
rm -rf "$ROOT" && mkdir -p "$ROOT"
COMMON=(system=h200 system.ranks_per_node=1 precision=amp_bf16 loader=synthetic "run.warmup_steps=$WARMUP"
        "run.steps=$STEPS" run.log_every=0 run.trace=off)
declare -A MODEL=(
    [bert_large]="model=bert model.size=large optim.name=adamw optim.lr=3e-5 optim.weight_decay=0.01 run.per_gpu_batch=32"
    [resnet50]="model=resnet model.depth=50 run.per_gpu_batch=256"
)
read -ra MODES <<< "ddp ${MODES:-z3_off z3_default z2_on}"
declare -A MODE=(
    [ddp]="framework=ddp"
    [z3_off]="framework=deepspeed framework.zero_stage=3 framework.overlap_comm=false"
    [z3_default]="framework=deepspeed framework.zero_stage=3"
    [z2_on]="framework=deepspeed framework.zero_stage=2 framework.overlap_comm=true"
    [fsdp]="framework=fsdp"
    [fsdp_keep]="framework=fsdp framework.reshard_after_forward=false"
    [fsdp_root]="framework=fsdp framework.shard_unit=root"
    [fsdp_autocast]="framework=fsdp framework.mixed_precision=autocast"
)
for m in ${MODELS:-bert_large resnet50}; do
    for mode in "${MODES[@]}"; do
        (( SECONDS > ${BUDGET_S:-480} )) && { echo "== $m-$mode: skipped, BUDGET_S spent"; continue; }
        echo "== $m-$mode: ${MODEL[$m]} ${MODE[$mode]}"
        start=$SECONDS
        # shellcheck disable=SC2086
        timeout -k 10 "$CAP_S" "$PY" -m ddlbench.cli run "${COMMON[@]}" "run.dir=$ROOT/$m-$mode" ${MODEL[$m]} ${MODE[$mode]} \
            2>&1 | grep -E "done:|rror|reduce" || true
        echo "   wall $((SECONDS - start)) s"
    done
done
"$PY" - "$ROOT" <<'PYEOF'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
rows = {}
for summary in sorted(root.glob("*/summary.json")):
    s = json.loads(summary.read_text())
    model, mode = summary.parent.name.split("-", 1)
    framework = json.loads((summary.parent / "meta.json").read_text())["framework"]
    overlap = framework.get("ds_config", {}).get("zero_optimization", {}).get("overlap_comm", "-")
    rows.setdefault(model, {})[mode] = (s.get("throughput_img_s"), s.get("status"), overlap)
print(f"{'model':<12} {'mode':<12} {'overlap_comm':>12} {'samples/s':>10} {'/ DDP':>7}")
for model, modes in rows.items():
    ddp = (modes.get("ddp") or (None,))[0]
    for mode, (rate, status, overlap) in modes.items():
        ratio = f"{rate / ddp:.3f}" if rate and ddp else "-"
        shown = f"{rate:,.1f}" if rate else status
        print(f"{model:<12} {mode:<12} {str(overlap):>12} {shown:>10} {ratio:>7}")
PYEOF
} 2>&1 | tee "$OUT/modes.log"
