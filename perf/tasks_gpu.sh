#!/usr/bin/env bash
# Issue 20's workloads on the H200 machine (offline: python 3.12, torch 2.11 cu130) x {DDP, FSDP2, DeepSpeed
# ZeRO-2} x bf16, one run each (docs/models.md): BERT-base, BERT-large (span head, synthetic SQuAD-shaped
# sequences of 384 tokens), RetinaNet (800 px synthetic images with boxes), and the classifier zoo
# (MODELS="$ZOO": ShuffleNetV2 x1.0, VGG 11/13/16/19, MobileNetV2, ResNet-50 without BatchNorm and without
# residual connections, on synthetic 224 px images).
#
# Carry in first (on a machine with a package index): tools/fetch_nlp_device_inputs.sh -> .devwheels/nlp/
# (transformers and what it imports) and tools/fetch_deepspeed_device_inputs.sh -> .devwheels/deepspeed/.
#   perf/tasks_gpu.sh      # in the repository root there; carry [".devwheels/nlp", ".devwheels/deepspeed"]
#   MODELS=zoo perf/tasks_gpu.sh   # the classifier zoo; carry [".devwheels/deepspeed"] (no transformers needed)
# Prints one line per run (status, samples/s in the run's unit, per GPU, last loss, peak allocated GiB).
# Knobs: MODELS ("bert_base bert_large retinanet") FRAMEWORKS ("ddp fsdp ds_z2") GPUS (all) WARMUP (5)
# STEPS (20) TRACE (auto: the trace window of every GPU run) BERT_BASE_BATCH (64) BERT_LARGE_BATCH (32)
# RETINANET_BATCH (16) ZOO_BATCH (128) BUDGET_S (500: no run starts after it) PYTHON (python3) SITE (/tmp/site).
# Nine runs may take longer than one device call: split them with MODELS=... or FRAMEWORKS=...
set -euo pipefail
cd "$(dirname "$0")/.."
source perf/device_env.sh
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/ddlbench_torch_extensions}
mkdir -p "$TORCH_EXTENSIONS_DIR"
ZOO="shufflenet_v2 vgg11 vgg13 vgg16 vgg19 mobilenet_v2 resnet50_no_bn resnet50_no_residual"
MODELS=${MODELS:-bert_base bert_large retinanet}
MODELS=${MODELS//zoo/$ZOO}
needs=(deepspeed:deepspeed)
[[ " $MODELS " == *" bert_"* ]] && needs+=(transformers:nlp)
for pair in "${needs[@]}"; do
    module=${pair%%:*} wheels=.devwheels/${pair##*:}
    if ! "$PY" -c "import $module" 2>/dev/null; then
        [[ -d $wheels ]] || { echo "$module is missing and $wheels is not here (see the header of $0)" >&2; exit 1; }
        # --target keeps what is there already (pyyaml, tqdm come in both sets): pip warns and goes on
        "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$wheels"/*.whl
    fi
done
"$PY" -c 'import deepspeed, torch; print(f"torch {torch.__version__}, deepspeed {deepspeed.__version__}")'

ROOT=${OUT:-/tmp}/tasks_gpu
rm -rf "$ROOT"
GPUS=${GPUS:-$(nvidia-smi -L | wc -l)}
COMMON=(system=h200 "system.ranks_per_node=$GPUS" precision=amp_bf16 loader=synthetic
        "run.warmup_steps=${WARMUP:-5}" "run.steps=${STEPS:-20}" run.log_every=10 "run.trace=${TRACE:-auto}")
declare -A MODEL=(
    [bert_base]="model=bert model.size=base optim.name=adamw optim.lr=3e-5 optim.weight_decay=0.01 run.per_gpu_batch=${BERT_BASE_BATCH:-64}"
    [bert_large]="model=bert model.size=large optim.name=adamw optim.lr=3e-5 optim.weight_decay=0.01 run.per_gpu_batch=${BERT_LARGE_BATCH:-32}"
    [retinanet]="model=retinanet optim.lr=0.01 run.per_gpu_batch=${RETINANET_BATCH:-16}"
)
for m in $ZOO; do MODEL[$m]="run.per_gpu_batch=${ZOO_BATCH:-128}"; done
MODEL[shufflenet_v2]+=" model=shufflenet_v2 model.width=1.0"
for d in 11 13 16 19; do MODEL[vgg$d]+=" model=vgg model.depth=$d"; done
MODEL[mobilenet_v2]+=" model=mobilenet_v2"
MODEL[resnet50_no_bn]+=" model=resnet model.depth=50 model.batch_norm=false optim.lr=0.01"
MODEL[resnet50_no_residual]+=" model=resnet model.depth=50 model.residual=false optim.lr=0.01"

declare -A FRAMEWORK=([ddp]="framework=ddp" [fsdp]="framework=fsdp" [ds_z2]="framework=deepspeed framework.zero_stage=2")
for m in $MODELS; do
    for f in ${FRAMEWORKS:-ddp fsdp ds_z2}; do
        if (( SECONDS > ${BUDGET_S:-500} )); then echo "== $m-$f: skipped, BUDGET_S spent"; continue; fi
        # shellcheck disable=SC2086  # the table's entries are lists of overrides
        run_cell "$m-$f-g$GPUS" ${MODEL[$m]} ${FRAMEWORK[$f]}
    done
done

"$PY" - "$ROOT" <<'PYEOF'
import json, sys
from pathlib import Path

for d in sorted(Path(sys.argv[1]).iterdir()):
    summary = d / "summary.json"
    s = json.loads(summary.read_text()) if summary.exists() else {"status": "incomplete"}
    if s.get("status") != "completed":
        print(f"{d.name:<22} {s.get('status')}: {s.get('error', '')}")
        continue
    unit = {"images": "img/s", "sequences": "seq/s"}[s.get("sample_unit", "images")]
    peak = s.get("peak_allocated_bytes")
    print(
        f"{d.name:<22} {s['throughput_img_s']:>9,.1f} {unit}  {s['per_gpu_img_s']:>8,.1f} per GPU  "
        f"loss {s['last_loss']:.3f}  peak {peak / 2**30 if peak else float('nan'):.1f} GiB"
    )
PYEOF
