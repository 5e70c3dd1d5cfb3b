#!/usr/bin/env bash
# The runs behind the papers' gallery (docs/papers/<study>.md): CPU miniatures of each seed study that a
# 2-core machine makes in minutes, the committed 1-GPU H200 runs of docs/results, and predictions from them
# for the GPU counts we cannot run. `make papers-runs` calls this; `make papers` draws the gallery.
#   PY=python bash docs/papers/make_runs.sh docs/papers/runs
# Nothing is overwritten: a study whose folder exists is skipped (remove it to make it anew).
set -euo pipefail
OUT=${1:?usage: make_runs.sh OUT_DIR}
PY=${PY:-python}
DDL=("$PY" -m ddlbench)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
H200_LOADERS=docs/results/2026-12-04-h200-loader-predict

"${DDL[@]}" data synth --out "$WORK/images" --classes 10 --per-class 30 --width 32 --height 32 --quiet
"${DDL[@]}" data convert --from "$WORK/images" --out "$WORK/tfrecord" --quiet
export DDLBENCH_IMAGENET="$WORK/images" DDLBENCH_IMAGENET_TFRECORD="$WORK/tfrecord"

fresh() {  # fresh STUDY: true when OUT/STUDY does not exist yet (say so when it does)
  if [[ -e "$OUT/$1" ]]; then
    echo "[make_runs] $OUT/$1 exists: kept (remove it to make it anew)" >&2
    return 1
  fi
}

if fresh aach2023; then
  # the scaling study in miniature: three frameworks x DALI (CPU pipeline) and native x 1 and 2 ranks
  "${DDL[@]}" campaign run experiment=aach2023_scaling_cpu "run.root=$OUT/aach2023"
  # the learning-rate study: three schedules x 1 and 2 ranks, 3 epochs
  "${DDL[@]}" campaign run experiment=aach2023_lr_cpu "data.path=$WORK/images" "run.root=$OUT/aach2023" \
    'campaign.gpus=[1,2]' run.epochs=3
  # JUWELS Booster's 4 to 1024 GPUs (the study's), predicted per loader from the 1-GPU H200 run (synthetic
  # data), its compute scaled x3 to an A100 (docs/predict.md), each loader's pace from loaderbench on that H200
  for loader in dali native; do
    "${DDL[@]}" predict precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=64 "loader=$loader" \
      --system juwels_booster --from "$H200_LOADERS/calibration" --compute-scale 3 \
      --loader-capacity "$H200_LOADERS/loaderbench/loaderbench.json" --gpus 4,8,16,32,64,128,256,512,1024 \
      --out "$OUT/aach2023/predicted-juwels_booster-$loader"
  done
fi

if fresh stash2021; then
  # the stall pairs of two models on 2 CPU ranks, the network pair over 2 namespace hosts
  for model in model=simple_cnn 'model=resnet model.depth=18'; do
    # shellcheck disable=SC2086
    "${DDL[@]}" stash run $model "data.path=$WORK/images" data.cache_evict=fadvise "run.root=$OUT/stash2021" \
      run.campaign=stash2021_cpu run.steps=4 run.warmup_steps=1 run.per_gpu_batch=4 run.log_every=0 \
      model.image_size=32 stash.gpus=2 stash.nodes=2
  done
  # the depth sweep (ResNet and VGG depths, ResNet without batch norm and without residuals)
  "${DDL[@]}" stash run experiment=stash2021_depth_cpu "run.root=$OUT/stash2021"
fi

if fresh composable2023; then
  # the software comparison: four modes x two precisions x ResNet-18 and a tiny BERT, 2 CPU ranks
  "${DDL[@]}" campaign run experiment=composable_2023_cpu "run.root=$OUT/composable2023"
  # the hardware comparison's mechanism (Figure 11): the fp32 ResNet-18 cells again under a second system
  # profile name on the same machine, paired by --baseline system=local_cpu: an A/A comparison, so its
  # relative times show the comparison's noise floor (we have no PCIe-switched GPUs to put beside it)
  "${DDL[@]}" campaign run experiment=composable_2023_cpu "run.root=$OUT/composable2023" \
    'campaign.axes.model=[resnet]' 'campaign.axes.precision=[fp32]' system.name=local_cpu_again
fi
echo "[make_runs] done: $OUT" >&2
