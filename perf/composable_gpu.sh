#!/usr/bin/env bash
# Seed study C's software-mode comparison (experiment=composable_2023) on one H200 (offline: python 3.12, torch
# 2.11): each mode of MODES (DDP, DDP + ZeroRedundancyOptimizer, FSDP2, DeepSpeed ZeRO-2) x each workload of
# WORKLOADS (ResNet-50 b128, MobileNetV2 b64, RetinaNet b16 800 px standing in for YOLOv5, BERT-base b96 and
# BERT-large b48 at 384 tokens: the study's per-GPU batches) at precision=amp_fp16 (the study's FP16 AMP),
# synthetic data, one run each of WARMUP + STEPS steps (run.epochs=null instead of the study's epoch budgets).
# Each cell is the study's own config, one GPU:
#   ddlbench run experiment=composable_2023 system=h200 system.ranks_per_node=1 run.epochs=null precision=amp_fp16 \
#       experiment/composable_mode@_global_=<mode> experiment/composable_workload@_global_=<workload> ...
# One GPU shows what each mode costs on its own (its wrapping, casts, optimizer sharding, gathers), not its
# communication: the study's 4-GPU comparison needs a machine of 4 GPUs. DataParallel (dp) is left out: on one
# GPU it scatters to and gathers from that GPU alone, i.e. it is the single-GPU model, nothing to compare.
# Carry [".devwheels/base", ".devwheels/deepspeed", ".devwheels/nlp"] (hydra, DeepSpeed, transformers for BERT):
#   WORKLOADS="resnet50 mobilenet_v2 retinanet" bash perf/composable_gpu.sh    # call 1
#   WORKLOADS="bert_base bert_large" bash perf/composable_gpu.sh               # call 2
# All run directories go under one campaign root, ROOT ($OUT/composable; NAME below is its last part); the
# script ends with `python -m ddlbench results $ROOT` (copied to $OUT/NAME_results.txt) and its own table per
# workload x mode: samples/s (summary.json throughput_img_s), the ratio to DDP of the same workload, peak
# allocated / reserved GiB, last loss (nan: the run's loss overflowed; `results` then leaves those steps out);
# a batch that does not fit one GPU at amp_fp16 is printed as such (summary's out_of_memory). The run
# directories are then packed into $OUT/NAME_runs.tar.gz and the raw root is left out of $OUT (what the
# device tool brings back: at most 8 files, 2 folders down; KEEP_RUNS=1 keeps it there); the log is
# $OUT/NAME.log. EXTRA: overrides added to every cell, off the study's settings (a second ROOT for them):
#   WORKLOADS=retinanet EXTRA="optim.lr=0.01" ROOT=$OUT/composable_lr001 bash perf/composable_gpu.sh
# Knobs: WORKLOADS ("resnet50 mobilenet_v2 retinanet bert_base bert_large") MODES ("ddp ddp_zero fsdp
# deepspeed_zero2"; DDP first, the ratios' baseline) WARMUP (10) STEPS (40) BUDGET_S (420: no cell starts
# after it) CAP_S (110: one cell's time limit) TRACE (off) EXTRA ("") ROOT ($OUT/composable) KEEP_RUNS (0)
# PYTHON (python3) SITE (/tmp/site). All five workloads take more than one 600 s device call: split them.
# Results: docs/results/2026-12-04-h200-composable.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
ROOT=${ROOT:-$OUT/composable}
NAME=$(basename "$ROOT")
{
source perf/device_env.sh
export TORCH_EXTENSIONS_DIR=${TORCH_EXTENSIONS_DIR:-/tmp/ddlbench_torch_extensions}
mkdir -p "$TORCH_EXTENSIONS_DIR"
WORKLOADS=${WORKLOADS:-resnet50 mobilenet_v2 retinanet bert_base bert_large}
MODES=${MODES:-ddp ddp_zero fsdp deepspeed_zero2}
WARMUP=${WARMUP:-10} STEPS=${STEPS:-40} BUDGET_S=${BUDGET_S:-420} CAP_S=${CAP_S:-110}
[[ " $MODES " == *" deepspeed_zero2 "* ]] && with_deepspeed
[[ " $WORKLOADS " == *" bert_"* ]] && with_wheels transformers nlp
machine_lines
"$PY" -c 'import deepspeed; print("deepspeed", deepspeed.__version__)' 2>/dev/null || echo "deepspeed: not importable"
"$PY" -c 'import transformers; print("transformers", transformers.__version__)' 2>/dev/null || echo "transformers: not importable"
rm -rf "$ROOT" && mkdir -p "$ROOT"
COMMON=(experiment=composable_2023 system=h200 system.ranks_per_node=1 run.epochs=null precision=amp_fp16
        "run.warmup_steps=$WARMUP" "run.steps=$STEPS" run.log_every=0 "run.trace=${TRACE:-off}")
read -ra EXTRA_ARGS <<< "${EXTRA:-}"
COMMON+=("${EXTRA_ARGS[@]}")
echo "common: ${COMMON[*]}"
for w in $WORKLOADS; do
    for mode in $MODES; do
        (( SECONDS > BUDGET_S )) && { echo "== $w-$mode: skipped, BUDGET_S spent"; continue; }
        cell=("experiment/composable_mode@_global_=$mode" "experiment/composable_workload@_global_=$w")
        echo "== $w-$mode: ${cell[*]}"
        start=$SECONDS
        timeout -k 10 "$CAP_S" "$PY" -m ddlbench.cli run "${COMMON[@]}" "run.dir=$ROOT/$w-$mode" "${cell[@]}" 2>&1 \
            | grep -E "done:|rror|out of memory" | cut -c1-400 || true
        echo "   wall $((SECONDS - start)) s"
    done
done
echo "== ddlbench results $ROOT"
"$PY" -m ddlbench results "$ROOT" 2>&1 | tee "$OUT/${NAME}_results.txt"
echo "== per workload x mode"
MODES=$MODES "$PY" - "$ROOT" <<'PYEOF' | tee -a "$OUT/${NAME}_results.txt"
import json, os, sys
from pathlib import Path

root = Path(sys.argv[1])
BATCH = {"resnet50": 128, "mobilenet_v2": 64, "retinanet": 16, "bert_base": 96, "bert_large": 48}  # the study's
rows = {}
for d in sorted(p for p in root.iterdir() if p.is_dir() and "-" in p.name):
    workload, mode = d.name.split("-", 1)
    s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {"status": "incomplete"}
    rows.setdefault(workload, {})[mode] = s
print(f"{'workload':<13} {'mode':<16} {'samples/s':>10} {'unit':<9} {'/ DDP':>6} {'alloc GiB':>9} {'resv GiB':>8} "
      f"{'loss':>7}  status")
order = {m: k for k, m in enumerate(os.environ.get("MODES", "").split())}
gib = lambda v: f"{v / 2**30:.2f}" if v else "-"
for workload, modes in rows.items():
    ddp = modes.get("ddp", {}).get("throughput_img_s") if modes.get("ddp", {}).get("status") == "completed" else None
    for mode, s in sorted(modes.items(), key=lambda item: order.get(item[0], len(order))):
        if s.get("status") != "completed":
            what = s.get("status")
            ends = [json.loads(e.read_text()) for e in (root / f"{workload}-{mode}").glob("end_rank*.json")]
            if s.get("out_of_memory") or any(e.get("out_of_memory") for e in ends):
                batch = s.get("per_gpu_batch") or BATCH.get(workload, "?")
                what = f"does not fit one GPU at amp_fp16 (batch {batch} per GPU): out of memory"
            elif s.get("error"):
                what += ": " + " ".join(str(s["error"]).split())[:160]
            print(f"{workload:<13} {mode:<16} {'-':>10} {'':<9} {'-':>6} {'-':>9} {'-':>8} {'-':>7}  {what}")
            continue
        rate = s["throughput_img_s"]
        ratio = f"{rate / ddp:.3f}" if ddp else "-"
        loss = s.get("last_loss")
        print(f"{workload:<13} {mode:<16} {rate:>10,.1f} {s.get('sample_unit', 'images'):<9} {ratio:>6} "
              f"{gib(s.get('peak_allocated_bytes')):>9} {gib(s.get('peak_reserved_bytes')):>8} "
              f"{loss if loss is None else f'{loss:.3f}':>7}  completed")
PYEOF
tar -czf "$OUT/${NAME}_runs.tar.gz" -C "$(dirname "$ROOT")" "$NAME" \
    && echo "runs packed: $OUT/${NAME}_runs.tar.gz ($(du -h "$OUT/${NAME}_runs.tar.gz" | cut -f1))"
[[ ${KEEP_RUNS:-0} == 1 || $ROOT != "$OUT"/* ]] || mv "$ROOT" "/tmp/$NAME.$$"
echo "total wall $SECONDS s"
} 2>&1 | tee "$OUT/$NAME.log"
