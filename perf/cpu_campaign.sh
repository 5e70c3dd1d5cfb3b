#!/usr/bin/env bash
# The issue-10 campaign shrunk to what a 2-core CPU machine can run: frameworks x loaders x 1-2 ranks
# (ResNet-18 on 64 px images), synthetic baselines, then the report.
#   perf/cpu_campaign.sh OUT_DIR            # runs into OUT_DIR/runs, report into OUT_DIR/report
set -euo pipefail
OUT=${1:?OUT_DIR}
DDL=${DDLBENCH:-ddlbench}
mkdir -p "$OUT"
[[ -d "$OUT/data" ]] || "$DDL" data synth --out "$OUT/data" --classes 10 --per-class 64 --width 96 --height 72 --quiet
COMMON=(model=resnet model.depth=18 model.num_classes=10 model.image_size=64 run.per_gpu_batch=16
        run.warmup_steps=3 run.steps=12 run.log_every=0 run.campaign=cpu_grid "run.root=$OUT/runs"
        "data.path=$OUT/data")
for framework in ddp horovod deepspeed; do
  for loader in synthetic native dali; do
    for ranks in 1 2; do
      echo "== $framework $loader $ranks rank(s)"
      "$DDL" run "${COMMON[@]}" "framework=$framework" "loader=$loader" "system.ranks_per_node=$ranks" 2>&1 \
        | grep -E "done:|error" || echo "   (failed: see $OUT/runs)"
    done
  done
done
"$DDL" results "$OUT/runs"
"$DDL" report "$OUT/runs" --out "$OUT/report" --formats png
