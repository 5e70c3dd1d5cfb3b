#!/usr/bin/env bash
# Issue 35 (items 1-3): ddlbench against bare PyTorch loops, and the parallel modes against DDP, in one device
# call on one H200 (offline: python 3.12, torch 2.11 cu130). Per task, at the same shapes:
#   - the bare loop: perf/bare_bert_qa.py (BERT-large QA, batch 32, seq 384, AdamW), perf/bare_retinanet.py
#     (RetinaNet, 800 px, batch 16, SGD), perf/harness_overhead.py's bare_loop (ResNet-50, 224 px, SGD);
#   - `ddlbench run framework=ddp` with tasks_gpu.sh's model overrides, precision=amp_bf16 loader=synthetic
#     system=h200 (on 1 GPU DDP does not wrap the model: the harness alone is compared);
#   - framework=fsdp (shard_unit children, the default, and blocks) on all three, framework=deepspeed
#     zero_stage 1 and 2 on BERT-large and ResNet-50.
# Goals: DDP >= 0.99 x bare per task; FSDP2 >= 0.90 x DDP; ZeRO-1/2 >= 0.95 x DDP.
# Carry [".devwheels/deepspeed", ".devwheels/nlp"] (tools/fetch_deepspeed_device_inputs.sh,
# tools/fetch_nlp_device_inputs.sh):   bash perf/references_gpu.sh
# Prints one line per run and a final table: samples/s (ddlbench: its throughput_img_s from the step events,
# and measured samples / the window's wall time, the bare loops' definition), DDP/bare, mode/DDP.
# Knobs: WARMUP (10) STEPS (30) ROUNDS (2: rounds after the first repeat bare + DDP only, interleaved, for the
# noise) MODELS ("bert_large resnet50 retinanet") RESNET_BATCH (256) BERT_BATCH (32) RETINANET_BATCH (16)
# BUDGET_S (420: no run starts after it) CAP_S (120: each run's timeout) PYTHON (python3) SITE (/tmp/site)
# FIRST_MODES (the first round's modes for every model; default: each model's list below) BARE_SYSTEM_ENV (0; 1: the
# bare loops run with conf/system/$SYSTEM.yaml's env, as the ranks of `ddlbench run` do, so the two differ by the harness);
# A check on a CPU that every step runs: SYSTEM=local_cpu BERT_SIZE=tiny BERT_BATCH=2 IMAGE_SIZE=128 RESNET_BATCH=2
# RETINANET_BATCH=2 WARMUP=1 STEPS=2 BUDGET_S=1200 CAP_S=300 PYTHON=<a venv's python> (15 min on 2 cores).
# Time on the H200 (2026-12-03): each `ddlbench run` 32-51 s start to end (BERT-large ~48, ResNet-50 ~35,
# RetinaNet ~40), each bare loop 14-34 s: all three models' first round is ~10 min, more than one device
# call: split it with MODELS=... Results: docs/results/2026-12-03-h200-frameworks.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source perf/device_env.sh
export PYTHONUNBUFFERED=1
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/ddlbench_torch_extensions}
mkdir -p "$TORCH_EXTENSIONS_DIR"
for pair in deepspeed:deepspeed transformers:nlp; do
    module=${pair%%:*} wheels=.devwheels/${pair##*:}
    if ! "$PY" -c "import $module" 2>/dev/null; then
        [[ -d $wheels ]] || { echo "$module is missing and $wheels is not here (see the header of $0)" >&2; exit 1; }
        timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$wheels"/*.whl
    fi
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
timeout 120 "$PY" -c 'import torch, torchvision, transformers, deepspeed, hydra; print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "torchvision", torchvision.__version__, "transformers", transformers.__version__, "deepspeed", deepspeed.__version__, "hydra", hydra.__version__)' 2>&1 | grep -v "real_accelerator"

WARMUP=${WARMUP:-10} STEPS=${STEPS:-30} CAP_S=${CAP_S:-120}
ROOT=$OUT/references
rm -rf "$ROOT"
mkdir -p "$ROOT"
SYSTEM=${SYSTEM:-h200} BERT_SIZE=${BERT_SIZE:-large} IMAGE_SIZE=${IMAGE_SIZE:-800}
DEVICE=$([[ $SYSTEM == *cpu* ]] && echo cpu || echo cuda)
COMMON=("system=$SYSTEM" system.ranks_per_node=1 precision=amp_bf16 loader=synthetic "run.warmup_steps=$WARMUP"
        "run.steps=$STEPS" run.log_every=0 run.trace=off)
declare -A MODEL=(
    [bert_large]="model=bert model.size=$BERT_SIZE optim.name=adamw optim.lr=3e-5 optim.weight_decay=0.01 run.per_gpu_batch=${BERT_BATCH:-32}"
    [resnet50]="model=resnet model.depth=50 run.per_gpu_batch=${RESNET_BATCH:-256}"
    [retinanet]="model=retinanet model.image_size=$IMAGE_SIZE optim.lr=0.01 run.per_gpu_batch=${RETINANET_BATCH:-16}"
)
declare -A BARE=(
    [bert_large]="perf/bare_bert_qa.py --size $BERT_SIZE --batch ${BERT_BATCH:-32} --seq-len 384 --device $DEVICE"
    [retinanet]="perf/bare_retinanet.py --batch ${RETINANET_BATCH:-16} --image-size $IMAGE_SIZE --device $DEVICE"
)
declare -A MODE=(
    [ddp]="framework=ddp" [fsdp]="framework=fsdp" [fsdp_blocks]="framework=fsdp framework.shard_unit=blocks"
    [ds_z1]="framework=deepspeed framework.zero_stage=1" [ds_z2]="framework=deepspeed framework.zero_stage=2"
)
declare -A MODES=([bert_large]="ddp fsdp fsdp_blocks ds_z1 ds_z2" [resnet50]="ddp fsdp fsdp_blocks ds_z1 ds_z2"
                  [retinanet]="ddp fsdp fsdp_blocks")

if [[ -n ${FIRST_MODES:-} ]]; then for m in "${!MODES[@]}"; do MODES[$m]=$FIRST_MODES; done; fi
BARE_ENV=()
if [[ ${BARE_SYSTEM_ENV:-0} == 1 ]]; then
    mapfile -t BARE_ENV < <("$PY" -c 'import sys, yaml; print(*(f"{k}={v}" for k, v in (yaml.safe_load(open(sys.argv[1])).get("env") or {}).items()), sep="\n")' "conf/system/$SYSTEM.yaml")
    echo "bare loops' environment: ${BARE_ENV[*]}"
fi

spent() {  # spent LABEL: true (and says so) when BUDGET_S is spent
    (( SECONDS <= ${BUDGET_S:-420} )) && return 1
    echo "== $1: skipped, BUDGET_S spent"
}
bare() {  # bare MODEL ROUND: the bare loop into $ROOT/bare-MODEL-rROUND.json
    local m=$1 label=bare-$1-r$2 start=$SECONDS
    spent "$label" && return
    echo "== $label"
    if [[ $m == resnet50 ]]; then
        env "${BARE_ENV[@]}" timeout -k 10 "$CAP_S" "$PY" - "$ROOT/$label.json" "$DEVICE" "${RESNET_BATCH:-256}" "$WARMUP" "$STEPS" <<'PYEOF' 2>&1 | grep -E "RESULT|rror"
import json, sys, torch
sys.path.insert(0, "perf")
from harness_overhead import bare_loop  # ResNet-50 by hand: SGD, channels_last, bf16 autocast, one batch

path, device, (batch, warmup, steps) = sys.argv[1], sys.argv[2], map(int, sys.argv[3:])
rate = bare_loop(depth=50, batch=batch, amp_dtype="bfloat16", channels_last=True, warmup=warmup, steps=steps,
                 device=torch.device(device))
json.dump({"script": "harness_overhead.bare_loop", "samples_per_s": rate, "unit": "img/s"}, open(path, "w"))
print(f"RESULT bare resnet50 b{batch}: {rate:,.1f} img/s over {steps} steps after {warmup} warm-up")
PYEOF
    else
        # shellcheck disable=SC2086  # the table's entries are argument lists
        env "${BARE_ENV[@]}" timeout -k 10 "$CAP_S" "$PY" ${BARE[$m]} --warmup "$WARMUP" --steps "$STEPS" --json "$ROOT/$label.json" 2>&1 \
            | grep -E "RESULT|rror"
    fi
    echo "   rc ${PIPESTATUS[0]}, wall $((SECONDS - start)) s"
}
cell() {  # cell MODEL MODE ROUND: one `ddlbench run` into $ROOT/MODEL-MODE-rROUND
    local label=$1-$2-r$3 start=$SECONDS
    spent "$label" && return
    echo "== $label: ${MODEL[$1]} ${MODE[$2]}"
    # shellcheck disable=SC2086
    timeout -k 10 "$CAP_S" "$PY" -m ddlbench.cli run "${COMMON[@]}" "run.dir=$ROOT/$label" ${MODEL[$1]} ${MODE[$2]} 2>&1 \
        | grep -E "done:|rror|ZeRO" | grep -v real_accelerator
    echo "   rc ${PIPESTATUS[0]}, wall $((SECONDS - start)) s"
}

MODELS=${MODELS:-bert_large resnet50 retinanet}
for m in $MODELS; do
    bare "$m" 0
    for f in ${MODES[$m]}; do cell "$m" "$f" 0; done
done
for ((round = 1; round < ${ROUNDS:-2}; round++)); do
    for m in $MODELS; do bare "$m" $round; cell "$m" ddp $round; done
done

"$PY" - "$ROOT" <<'PYEOF'
import json, statistics, sys
from pathlib import Path

root = Path(sys.argv[1])
GOAL = {"ddp": 0.99, "fsdp": 0.90, "fsdp_blocks": 0.90, "ds_z1": 0.95, "ds_z2": 0.95}
runs = {}  # (model, mode) -> list of (events rate, wall rate, last loss, peak GiB) over the rounds
for path in sorted(root.iterdir()):
    if path.suffix == ".json":  # a bare loop
        _, model, _ = path.stem.split("-")
        r = json.loads(path.read_text())
        runs.setdefault((model, "bare"), []).append((r["samples_per_s"], r["samples_per_s"], r.get("last_loss"), r.get("peak_allocated_gib")))
        continue
    model, mode, _ = path.name.split("-")
    summary = path / "summary.json"
    s = json.loads(summary.read_text()) if summary.exists() else {"status": "incomplete"}
    if s.get("status") != "completed":
        print(f"{path.name}: {s.get('status')}: {s.get('error', '')}")
        continue
    peak = s.get("peak_allocated_bytes")
    runs.setdefault((model, mode), []).append(
        (s["throughput_img_s"], s["measured_samples"] / s["wall_s"], s["last_loss"], peak / 2**30 if peak else None)
    )

mean = lambda key, i: statistics.mean(r[i] for r in runs[key]) if key in runs else None  # noqa: E731
fmt = lambda x, spec=",.1f": "-" if x is None else format(x, spec)  # noqa: E731
print("\nsamples/s (mean over rounds; each round in brackets). ddlbench: events = throughput_img_s, wall = measured samples / window wall time")
print(f"{'model':<11} {'mode':<12} {'events':>9} {'wall':>9}  {'ratio':<33} {'goal':>5}  {'met':<4} {'loss':>6} {'peak GiB':>8}  rounds")
for model in ("bert_large", "resnet50", "retinanet"):
    for mode in ("bare", "ddp", "fsdp", "fsdp_blocks", "ds_z1", "ds_z2"):
        key = (model, mode)
        if key not in runs:
            continue
        events, wall = mean(key, 1 if mode == "bare" else 0), mean(key, 1)
        ratio, goal, met = "", "", ""
        if mode == "ddp" and (model, "bare") in runs:
            r = wall / mean((model, "bare"), 1)
            ratio = f"wall/bare {r:.3f} (events {events / mean((model, 'bare'), 1):.3f})"
            goal, met = GOAL[mode], "yes" if r >= GOAL[mode] else "NO"
        elif mode != "bare" and (model, "ddp") in runs:
            r = events / mean((model, "ddp"), 0)
            ratio = f"/DDP {r:.3f} (wall {wall / mean((model, 'ddp'), 1):.3f})"
            goal, met = GOAL[mode], "yes" if r >= GOAL[mode] else "NO"
        loss, peak = runs[key][-1][2], runs[key][-1][3]
        each = " ".join(f"{r[0]:,.1f}" for r in runs[key])
        print(f"{model:<11} {mode:<12} {fmt(events):>9} {fmt(wall):>9}  {ratio:<33} {goal!s:>5}  {met:<4} {fmt(loss, '.3f'):>6} {fmt(peak, '.1f'):>8}  [{each}]")
PYEOF
} 2>&1 | tee "$OUT/references_log.txt"
# the run directories stay on the device; the log and each run's summary come back
(cd "$OUT" && find references -maxdepth 2 \( -name "*.json" -o -name "rank0.jsonl" \) -print0 \
    | tar -czf references_runs.tgz --null -T -)
rm -rf "$OUT/references"
