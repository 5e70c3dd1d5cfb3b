#!/usr/bin/env bash
# Stash stalls on the H200 (issue 9 GPU proof); for the lead's device session, not CI.
#   perf/stash_gpu.sh interconnect   # on nvidia-h200-x2: ResNet-50/152 and VGG16 at batch 32 and 128, bf16,
#                                     #   1 GPU vs 2 GPUs of one node (synthetic, same per-GPU batch and samples)
#   perf/stash_gpu.sh io             # on nvidia-h200 (1 GPU): CPU/prep and disk/fetch stalls, ResNet-50 bf16
#                                     #   batch 128, DALI and native loaders, warm vs cold page cache
# Each phase ends with `ddlbench stash report` (stalls in s and %, L / buckets / gradient MB, the
# (latency + G/(L*B)) * L estimate, $ per run and epoch from conf/stash/prices.yaml).
# Needs hydra-core/omegaconf: from .devwheels/base (see perf/horovod_gpu.sh) when not installed; DALI
# (nvidia-dali-cuda130) for the dali half of `io` (skipped, with a line saying so, when missing).
# Knobs: PYTHON (python3) SITE (/tmp/site) OUT (/tmp) STEPS (40) WARMUP (10) REPEATS (3) MODELS BATCHES
#        IMAGES_PER_CLASS (600) CLASSES (20): 12,000 JPEGs, more than one run reads, so cold stays cold
# A CPU smoke test of the commands (no GPU):
#   SYSTEM=local_cpu PRECISION=fp32 MODELS="simple_cnn" BATCHES=8 STEPS=4 WARMUP=1 REPEATS=1 CLASSES=10 IMAGES_PER_CLASS=20 \
#     perf/stash_gpu.sh io
set -euo pipefail
cd "$(dirname "$0")/.."
PHASE=${1:?usage: perf/stash_gpu.sh interconnect|io}
source perf/device_env.sh
"$PY" -c 'import torch; print(f"torch {torch.__version__}, {torch.cuda.device_count()} GPU(s)", *[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])'
date -u +"%Y-%m-%dT%H:%M:%SZ"

ROOT=${OUT:-/tmp}/stash_gpu
SYSTEM=${SYSTEM:-h200}
PRECISION=${PRECISION:-amp_bf16}
STEPS=${STEPS:-40}
WARMUP=${WARMUP:-10}
REPEATS=${REPEATS:-3}
COMMON=("system=$SYSTEM" "precision=$PRECISION" framework=ddp "run.steps=$STEPS" "run.warmup_steps=$WARMUP"
        run.log_every=0 "run.root=$ROOT" "stash.repeats=$REPEATS")
model_overrides() {  # resnet50 | resnet152 | vgg16 | simple_cnn -> Hydra overrides
    case $1 in
        resnet*) echo "model=resnet model.depth=${1#resnet}" ;;
        *) echo "model=$1" ;;
    esac
}
stash() {  # action, overrides...
    "$PY" -m ddlbench.cli stash "$@"
}

case $PHASE in
interconnect)
    GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
    [[ $GPUS -ge 2 || $SYSTEM != h200 ]] || { echo "interconnect needs 2 GPUs (nvidia-h200-x2); found $GPUS" >&2; exit 1; }
    for model in ${MODELS:-resnet50 resnet152 vgg16}; do
        for batch in ${BATCHES:-32 128}; do
            # shellcheck disable=SC2046
            args=("${COMMON[@]}" $(model_overrides "$model") "run.per_gpu_batch=$batch" run.campaign=stash-interconnect
                  stash.gpus=2 stash.nodes=1 stash.loader=none)
            echo "== interconnect $model batch $batch"
            stash plan "${args[@]}" | tail -1
            stash run "${args[@]}" 2>&1 | grep -E "done:|rror" || true
        done
    done
    stash report "${COMMON[@]}" model=resnet run.campaign=stash-interconnect stash.gpus=2 stash.nodes=1 stash.loader=none
    ;;
io)
    DATA=$ROOT/data/synth
    if [[ ! -d $DATA ]]; then
        "$PY" -m ddlbench.cli data synth --out "$DATA" --classes "${CLASSES:-20}" --per-class "${IMAGES_PER_CLASS:-600}" \
            --width 500 --height 375 --quiet
    fi
    loaders=(native)
    if "$PY" -c 'import nvidia.dali' 2>/dev/null; then loaders+=(dali); else echo "nvidia.dali missing: dali half skipped"; fi
    for model in ${MODELS:-resnet50}; do
        for batch in ${BATCHES:-128}; do
            for loader in "${loaders[@]}"; do
                # shellcheck disable=SC2046
                args=("${COMMON[@]}" $(model_overrides "$model") "run.per_gpu_batch=$batch" "data.path=$DATA"
                      "run.campaign=stash-io-$loader" stash.gpus=1 stash.nodes=1 "stash.loader=$loader")
                echo "== io $model batch $batch loader $loader"
                stash plan "${args[@]}" | tail -1
                stash run "${args[@]}" 2>&1 | grep -E "done:|rror" || true
                stash report "${args[@]}"
            done
        done
    done
    ;;
*)
    echo "unknown phase $PHASE: use interconnect or io" >&2; exit 2 ;;
esac
