#!/usr/bin/env bash
# One device call (nvidia-h200): validation on the GPU (issue 19), ResNet-50 bf16 batch 256 on the
# learnable synthetic set (10 classes, 320x240 JPEGs; a separate held-out folder, so every run trains on
# the same files):
#   1. throughput with evaluation off, this tree against the code before the optimizer / validation work
#      (OLD, a `git archive` of it carried in .devwheels/old), interleaved rounds: the ratio should be 1;
#   2. the same with an evaluation after every epoch: its time share of the run, throughput (evaluations
#      are in no step) and top-1 per epoch;
#   3. time to accuracy: run.target_top1 stops the run at the first epoch that reaches it.
# Carry [".devwheels/base", ".devwheels/old"] (plus DALI's parts: perf/loaders_gpu.sh says how; without
# DALI the loader is native_gpu).
#   bash perf/eval_gpu.sh      (runs under $OUT/eval)
# Knobs: SKIP_OFF (0; 1: not part 1) ROUNDS (2) WARMUP (15) STEPS (60) EPOCHS (4) TARGET (0.9) LOADER (dali, else native_gpu) OLD (.devwheels/old)
#        SYSTEM (h200) EXTRA (overrides appended to every run: a CPU rehearsal, e.g. "model=simple_cnn precision=fp32")
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
OLD=${OLD:-$PWD/.devwheels/old}
LOADER=${LOADER:-dali}
[[ $LOADER == dali ]] && ! "$PY" -c 'import nvidia.dali' 2>/dev/null && LOADER=native_gpu
DATA=/tmp/learn
[[ -d $DATA/train ]] || "$PY" -m ddlbench.cli data synth --out "$DATA/train" --classes 10 --per-class 512 --width 320 --height 240 --quiet
[[ -d $DATA/val ]] || "$PY" -m ddlbench.cli data synth --out "$DATA/val" --classes 10 --per-class 100 --width 320 --height 240 --first-index 512 --quiet
ROOT=$OUT/eval
read -ra EXTRA <<< "${EXTRA:-}"
COMMON=("system=${SYSTEM:-h200}" precision=amp_bf16 model=resnet model.depth=50 model.num_classes=10 run.per_gpu_batch=256
        run.log_every=0 "run.root=$ROOT" "loader=$LOADER" "data.path=$DATA/train" "${EXTRA[@]}")
STEADY=("run.warmup_steps=${WARMUP:-15}" "run.steps=${STEPS:-60}")
new() { "$PY" -m ddlbench.cli run "${COMMON[@]}" "$@" 2>&1 | grep -E "done:|rror|reached|eval after" | sed 's/ -> .*//'; }
old() { (cd "$OLD" && PYTHONPATH="$OLD:$SITE" "$PY" -m ddlbench.cli run "${COMMON[@]}" "$@" 2>&1 | grep -E "done:|rror" | sed 's/ -> .*//'); }
echo "== loader $LOADER; evaluation off: this tree against the code before it, interleaved"
[[ ${SKIP_OFF:-0} == 1 ]] && ROUNDS=0
for round in $(seq 0 $(( ${ROUNDS:-2} - 1 ))); do
    echo "round $round old"; old "${STEADY[@]}" run.campaign=eval_off_old "run.repeat=$round"
    echo "round $round new"; new "${STEADY[@]}" run.campaign=eval_off_new "run.repeat=$round"
done
# a one-epoch warm-up, then cosine: at a constant 0.1 from the first step, the BatchNorm running statistics
# lag the weights and the first evaluations read nothing
LEARN=(optim.schedule.name=cosine optim.schedule.unit=epochs optim.schedule.warmup_steps=1)
echo "== an evaluation after every epoch (${EPOCHS:-4} epochs)"
new "${LEARN[@]}" run.campaign=eval_on "run.epochs=${EPOCHS:-4}" run.warmup_steps=5 "data.val_path=$DATA/val" run.eval_every_epochs=1
echo "== time to accuracy: run.target_top1=${TARGET:-0.9}"
new "${LEARN[@]}" run.campaign=target run.epochs=12 run.warmup_steps=5 "data.val_path=$DATA/val" run.eval_every_epochs=1 \
    "run.target_top1=${TARGET:-0.9}"

"$PY" - "$ROOT" <<'PY'
import json, statistics, sys
from pathlib import Path

root = Path(sys.argv[1])


def summaries(campaign):
    return [json.loads(p.read_text()) for p in sorted((root / campaign).glob("*/summary.json"))]


def img_s(campaign):
    return [s["throughput_img_s"] for s in summaries(campaign) if s.get("status") == "completed"]


old, new = img_s("eval_off_old"), img_s("eval_off_new")
if old and new:
    print(f"RESULT eval off: new {statistics.median(new):,.1f} img/s, before {statistics.median(old):,.1f} img/s, "
          f"ratio {statistics.median(new) / statistics.median(old):.4f} (runs new {new}, before {old})")
for campaign in ("eval_on", "target"):
    for s, run in zip(summaries(campaign), sorted((root / campaign).glob("*/summary.json"))):
        if s.get("status") != "completed":
            print(f"RESULT {campaign}: {s.get('status')}: {s.get('error', '')[:300]}")
            continue
        evals = [json.loads(line) for line in (run.parent / "eval.jsonl").read_text().splitlines()]
        eval_s = sum(e["eval_s"] for e in evals)
        train_s = evals[-1]["train_s"]
        print(f"RESULT {campaign}: {s['throughput_img_s']:,.1f} img/s over {s['measured_steps']} measured steps; "
              f"{len(evals)} evaluations of {evals[0]['samples']} images, {eval_s:.2f} s = {eval_s / train_s:.1%} of "
              f"the {train_s:.1f} s from the first step; top-1 per epoch "
              + ", ".join(f"{e['top1']:.3f}" for e in evals))
        if "target_top1" in s:
            print(f"RESULT target {s['target_top1']}: reached {s['target_reached']}, {s['time_to_target_s']} s, "
                  f"{s['samples_to_target']} samples, {s['steps_to_target']} steps")
PY
