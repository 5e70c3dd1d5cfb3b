#!/usr/bin/env bash
# The 2-GPU device session (nvidia-h200-x2), one phase per device call. Each call also carries one of
# the DALI parts (.devwheels/dali/part.*, made by ../shared/device/stage-wheels.sh prepare) and receives it
# into /tmp/stage, which survives while the machine stays warm; the `dali` phase carries the last part
# and installs them all.
#   bash bench/gpu_session_x2.sh ds          # + .devwheels/deepspeed: DeepSpeed ZeRO 0/1 (STAGES) vs DDP, 1 and 2 GPUs
#   bash bench/gpu_session_x2.sh hvd         # + .devwheels/horovod: Horovod (built there) vs DDP, 1 and 2 GPUs
#   bash bench/gpu_session_x2.sh breakdown   # timers vs trace, commbench busbw, comm-hook overhead on 2 GPUs
#   bash bench/gpu_session_x2.sh stash       # Stash interconnect stall: 1 vs 2 GPUs of one node
#   bash bench/gpu_session_x2.sh dali        # install DALI; loaders alone, training fed by DALI on 1 and 2 GPUs
# Call them back to back in this order, carrying part.aa .. part.ae (and .devwheels/stage-wheels.sh):
# the machine goes back after 30 s idle, and /tmp/stage with it. Each phase fits one 600 s call.
# Logs go to $OUT/<phase>.txt; the RESULT lines are what docs/results/ quote.
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/stage
cp .devwheels/dali/part.* /tmp/stage/ 2>/dev/null && echo "DALI parts here: $(ls /tmp/stage | tr '\n' ' ')"
source bench/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
phase=${1:?ds|hvd|breakdown|stash|dali}
case $phase in
  # 2 rounds x (DDP + 2 stages) x (1 + 2 GPUs) = 12 cells of 24-48 s each: under the 600 s per call
  # (with ZeRO-2 as well, 16 cells took 598 s)
  ds) STEPS=60 ROUNDS=${ROUNDS:-2} STAGES=${STAGES:-0 1} bash bench/deepspeed_gpu.sh ;;
  hvd) STEPS=60 bash bench/horovod_gpu.sh ;;
  breakdown) ROUNDS=2 bash bench/breakdown_gpu.sh ;;
  stash) MODELS=${MODELS:-resnet50 vgg16} BATCHES=${BATCHES:-32} REPEATS=1 bash bench/stash_gpu.sh interconnect ;;
  dali)
    bash .devwheels/stage-wheels.sh install .devwheels/dali >/dev/null && echo "DALI installed"
    # the bench's DALI threads: 8 per rank of the 32 cores (as system=h200's cpus_per_rank)
    "$PY" bench/dali_gpu.py --data /tmp/ddl_jpeg --make-data 4096 --only loaders --loader-batches 20 \
        --json "$OUT/dali_loaders.json" 2>&1 | grep -E "^(loader|RESULT)|rror"
    "$PY" bench/dali_gpu.py --data /tmp/ddl_jpeg --only train --rounds 2 --train-cases synthetic,dali-file \
        --runs-root "$OUT/dali_runs" --json "$OUT/dali_train_g1.json" 2>&1 | grep -E "^(train|RESULT)|rror"
    "$PY" bench/dali_gpu.py --data /tmp/ddl_jpeg --only train --gpus 2 --rounds 2 --train-cases synthetic,dali-file,dali-file-q8 \
        --runs-root "$OUT/dali_runs" --json "$OUT/dali_train_g2.json" 2>&1 | grep -E "^(train|RESULT)|rror"
    # where the 2-GPU DALI runs lose their time (slow steps of 10-30 ms, 2026-11-29): a profiler window,
    # telemetry, and the trace's idle / kernel / comm split per rank
    "$PY" -m benchmarks.cli run framework=ddp model=resnet model.depth=50 precision=amp_bf16 system=h200 \
        system.ranks_per_node=2 run.per_gpu_batch=256 loader=dali data.path=/tmp/ddl_jpeg loader.num_threads=8 \
        run.warmup_steps=40 run.steps=40 run.log_every=0 "run.profile_steps=[30,37]" run.telemetry_hz=10 \
        run.dir="$OUT/dali-g2-trace" 2>&1 | grep -E "done|rror"
    for rank in 0 1; do "$PY" -m analysis.breakdown "$OUT/dali-g2-trace" --rank $rank; done
    ;;
  *) echo "unknown phase $phase: choose ds, hvd, breakdown, stash or dali" >&2; exit 2 ;;
esac 2>&1 | tee "$OUT/$phase.txt"
# at most 8 files (16 MiB each) come back from $OUT: the run directories travel as one tarball (their
# step logs, meta.json, telemetry), profiler traces as another, which may be too large to come back
runs=$(find "$OUT" -mindepth 1 -maxdepth 1 -type d -printf '%f\n')
if [[ -n $runs ]]; then
    # shellcheck disable=SC2086  # the folder names are ours: letters, digits, '-' and '_'
    traces=$(cd "$OUT" && find $runs -type d -name trace)
    [[ -z $traces ]] || tar -C "$OUT" -czf "$OUT/$phase-traces.tgz" $traces
    tar -C "$OUT" -czf "$OUT/$phase-runs.tgz" --exclude=trace $runs && (cd "$OUT" && rm -rf $runs)
    ls -la "$OUT"
fi
