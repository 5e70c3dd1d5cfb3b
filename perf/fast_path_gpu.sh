#!/usr/bin/env bash
# Issue 63's fast path on one lent GPU (docs/mfu.md, docs/results): ResNet-50 (bf16, batch 256) and BERT-large
# (bf16, batch 32, 384 tokens, AdamW) on synthetic data, DDP, each as the plain run and as experiment=fast_path
# (channels_last, torch.compile with CUDA graphs, the fused optimizer), then the fast path's steps one at a time
# for ResNet-50 (compile alone, + fused, + CUDA graphs) and at batch 384; BERT-large fp32 once, for its MFU
# against the fp32 matmul peak (benchmarks/peaks.py run_peak). One line per run: samples/s, MFU, J/sample, the
# peak's note. Carry .devwheels/base (hydra-core, omegaconf, antlr4, mlperf-logging); the GPU machine has
# transformers 5.
#   perf/fast_path_gpu.sh         # in the repository root there
# Knobs: WARMUP (15: compile and graph capture happen in it) STEPS (100) CELLS (all) BUDGET_S (540: no run
# starts after it) PYTHON (python3) SITE (/tmp/site).
set -uo pipefail
cd "$(dirname "$0")/.."
source perf/device_env.sh
machine_lines
ROOT=/tmp/fast_path  # the runs; their summaries together in $OUT/fast_path_summaries.json
rm -rf "$ROOT"; mkdir -p "$ROOT"
WARMUP=${WARMUP:-15} STEPS=${STEPS:-100} BUDGET_S=${BUDGET_S:-540}
COMMON=(system=h200 framework=ddp loader=synthetic "run.warmup_steps=$WARMUP" "run.steps=$STEPS" run.trace=off
    run.log_every=0)
R50=(model=resnet model.depth=50 run.per_gpu_batch=256 precision=amp_bf16)
BERT=(model=bert model.size=large run.per_gpu_batch=32 optim.name=adamw optim.lr=3e-5 optim.weight_decay=0.01)
declare -A CELL=(
    [r50_eager]="${R50[*]}"
    [r50_compile]="${R50[*]} model.compile=true"
    [r50_compile_fused]="${R50[*]} model.compile=true optim.fused=true"
    [r50_fast]="${R50[*]} experiment=fast_path"
    [r50_fast_b384]="${R50[*]} experiment=fast_path run.per_gpu_batch=384"
    [bert_eager]="${BERT[*]} precision=amp_bf16"
    [bert_fast]="${BERT[*]} experiment=fast_path"
    [bert_fp32]="${BERT[*]} precision=fp32 run.steps=30"
)
ORDER=${CELLS:-r50_eager r50_fast bert_eager bert_fast r50_compile r50_compile_fused r50_fast_b384 bert_fp32}
for label in $ORDER; do
    (( SECONDS < BUDGET_S )) || { echo "== $label: skipped (budget)"; continue; }
    # shellcheck disable=SC2086
    run_cell "$label" ${CELL[$label]}
done
"$PY" - "$ROOT" "${OUT:-/tmp}/fast_path_summaries.json" <<'PY'
import json, sys
from pathlib import Path
summaries = {p.parent.name: json.loads(p.read_text()) for p in sorted(Path(sys.argv[1]).glob("*/summary.json"))}
Path(sys.argv[2]).write_text(json.dumps(summaries, indent=1))
for name, s in summaries.items():
    mfu = f"{s['mfu']:.1%}" if s.get("mfu") is not None else "-"
    jps = f"{s['energy_j_per_sample']:.3f}" if s.get("energy_j_per_sample") is not None else "-"
    print(f"{name:18s} {s['status']:9s} {s.get('per_gpu_img_s') or 0:9.1f}/s MFU {mfu:>6s} "
          f"J/sample {jps:>6s} W {s.get('avg_power_w') or 0:5.0f} peak {s.get('peak_tflops') or 0:.1f} | {s.get('mfu_note')}")
PY
