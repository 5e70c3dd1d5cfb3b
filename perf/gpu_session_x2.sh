#!/usr/bin/env bash
# The 2-GPU device session (nvidia-h200-x2), one phase per device call. DALI is too large for one call:
# each call also carries one part of .devwheels/dali-slim (made by tools/dali_slim.sh prepare), which
# lands in /tmp/stage and survives while the machine stays warm; the `dali` phase, carrying the last
# part, unpacks them. Call back to back (the machine goes back after 30 s idle, and /tmp/stage with it):
#   bash perf/gpu_session_x2.sh ds          # + part.00, .devwheels/deepspeed: ZeRO 0/1 (STAGES) vs DDP, 1 and 2 GPUs
#   bash perf/gpu_session_x2.sh ds-trace    # + part.00 or .01, .devwheels/deepspeed: ZeRO-2 cells, a profiled 2-GPU ZeRO-0 run
#   bash perf/gpu_session_x2.sh comm        # + part.01: commbench on 2 GPUs (all-reduce sweep, P2P matrix)
#   bash perf/gpu_session_x2.sh dali        # + part.02, then part.03: DALI settings vs synthetic, one run each, 2 and 1 GPUs
#   bash perf/gpu_session_x2.sh dali-confirm  # right after dali: its two best settings, 2 rounds, 2 and 1 GPUs
#   bash perf/gpu_session_x2.sh hvd         # + .devwheels/horovod: Horovod (built there) vs DDP, 1 and 2 GPUs
#   bash perf/gpu_session_x2.sh breakdown   # timers vs trace, commbench busbw, comm-hook overhead on 2 GPUs
#   bash perf/gpu_session_x2.sh stash       # Stash interconnect stall: 1 vs 2 GPUs of one node
# Each phase fits one 600 s call. Logs go to $OUT/<phase>.txt; the RESULT lines are what docs/results/ quote.
# 30 device minutes hold about three phases: e.g. ds (part.00), stash or hvd (part.01), dali (part.02, then a call carrying part.03: tools/dali_slim.sh splits DALI in 4 parts).
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/stage
cp .devwheels/dali-slim/part.* /tmp/stage/ 2>/dev/null && echo "DALI parts here: $(ls /tmp/stage | tr '\n' ' ')"
source perf/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
# which cores sit near which GPU: what system.cpu_bind=cores (equal contiguous blocks) should match
nvidia-smi topo -m 2>/dev/null | grep -E "^(GPU|\s)" | cut -c1-120
lscpu | grep -E "^(NUMA|Thread|Core|Socket)"
date -u +"%Y-%m-%dT%H:%M:%SZ"
phase=${1:?ds|ds-trace|comm|dali|dali-confirm|hvd|breakdown|stash}
# the DALI settings the dali phases try: each is the dali-file case (system=h200's defaults: 16 threads,
# hw_decoder_load 0.65, 32 CUDA hardware queues) or the synthetic one where it says loader=synthetic, plus
# these overrides. conn8: CUDA's default of 8 hardware work queues, the setting before 2026-11-29, when
# DALI's ~24 streams shared them with training's stream (DALI fed 0.88 of synthetic on 2 H200; 0.96 with 32)
DALI_CASES=(--case t8:loader.num_threads=8 --case hw1:loader.hw_decoder_load=1.0 --case hw0.4:loader.hw_decoder_load=0.4
            --case q8:loader.prefetch_queue_depth=8 --case bind:system.cpu_bind=cores
            --case synthetic-conn8:loader=synthetic,system.env.CUDA_DEVICE_MAX_CONNECTIONS=8
            --case conn8:system.env.CUDA_DEVICE_MAX_CONNECTIONS=8
            --case conn8-t8:system.env.CUDA_DEVICE_MAX_CONNECTIONS=8,loader.num_threads=8)
# which of them the dali phase runs: 2 GPUs, 1 GPU, then 2 GPUs again (a second run of the default)
DALI_G2=${DALI_G2:-synthetic,dali-file,t8,conn8-t8,synthetic-conn8}
DALI_G1=${DALI_G1:-synthetic,dali-file,conn8-t8}
DALI_G2_AGAIN=${DALI_G2_AGAIN:-synthetic,dali-file}
case $phase in
  # 2 rounds x (DDP + 2 stages) x (1 + 2 GPUs) = 12 cells of 24-48 s each: under the 600 s per call
  # (with ZeRO-2 as well, 16 cells took 598 s)
  ds) STEPS=60 ROUNDS=${ROUNDS:-2} STAGES=${STAGES:-0 1} bash perf/deepspeed_gpu.sh ;;
  ds-trace)
    STEPS=60 ROUNDS=1 STAGES=2 bash perf/deepspeed_gpu.sh
    # where ZeRO-0 on 2 GPUs loses its time (bwd +3 ms, opt +2 ms per step against DDP, 2026-11-29)
    for cell in "zero0:framework=deepspeed framework.zero_stage=0" "ddp:framework=ddp"; do
        dir="$OUT/trace-${cell%%:*}"
        # shellcheck disable=SC2086  # the overrides after the label are split on purpose
        "$PY" -m ddlbench.cli run ${cell#*:} model=resnet model.depth=50 precision=amp_bf16 system=h200 \
            system.ranks_per_node=2 run.per_gpu_batch=256 loader=synthetic run.warmup_steps=30 run.steps=20 \
            run.log_every=0 "run.profile_steps=[25,28]" run.dir="$dir" 2>&1 | grep -E "done|rror"
        for rank in 0 1; do "$PY" -m analysis.breakdown "$dir" --rank $rank; done
    done
    ;;
  comm) "$PY" -m ddlbench.cli commbench --nproc 2 ;;
  hvd) STEPS=60 bash perf/horovod_gpu.sh ;;
  breakdown) ROUNDS=2 bash perf/breakdown_gpu.sh ;;
  stash) MODELS=${MODELS:-resnet50 vgg16} BATCHES=${BATCHES:-32} REPEATS=1 bash perf/stash_gpu.sh interconnect ;;
  dali)
    # one run each of the DALI settings in DALI_G2 (2 GPUs) and DALI_G1 (1 GPU) against synthetic; the
    # per-run lines give each rank's GPU data wait, forward and step against the host's time in next() and
    # for the whole step. 2026-11-29: every ~3rd step the host waited 40-85 ms in next() on one rank.
    bash tools/dali_slim.sh install
    for run in "2 $DALI_G2 g2" "1 $DALI_G1 g1" "2 $DALI_G2_AGAIN g2-again"; do
        read -r gpus cases tag <<<"$run"
        make=(); [[ -d /tmp/ddl_jpeg ]] || make=(--make-data 4096)
        "$PY" perf/dali_gpu.py --data /tmp/ddl_jpeg "${make[@]}" --only train --gpus "$gpus" "${DALI_CASES[@]}" \
            --train-cases "$cases" --runs-root "$OUT/dali_runs_$tag" --json "$OUT/dali_$tag.json" 2>&1 \
            | grep -E "^(train|RESULT|data|  )|rror"
    done
    mkdir -p /tmp/persist && cp "$OUT"/dali_g*.json /tmp/persist/
    ;;
  dali-confirm)
    # right after `dali` (DALI, the data and its figures are still on the machine): the two best DALI
    # settings of that call other than dali-file (the default), against synthetic and the default, 2 rounds
    # on 2 GPUs, then on 1 GPU
    [[ -f /tmp/persist/dali_g2.json && -d /tmp/ddl_jpeg ]] || { echo "run the dali phase first (same warm machine)" >&2; exit 1; }
    best=$("$PY" -c 'import json, sys; f = json.load(open(sys.argv[1]))["train_img_s"]
print(",".join(sorted((k for k in f if k != "dali-file" and not k.startswith("synthetic")), key=f.get, reverse=True)[:2]))' /tmp/persist/dali_g2.json)
    [[ -n $best ]] || { echo "the dali phase ran no DALI setting besides dali-file: nothing to confirm" >&2; exit 1; }
    echo "best two of the dali phase: $best"
    "$PY" perf/dali_gpu.py --data /tmp/ddl_jpeg --only train --gpus 2 --rounds 2 "${DALI_CASES[@]}" \
        --train-cases "synthetic,dali-file,$best" \
        --runs-root "$OUT/dali_runs" --json "$OUT/dali_confirm_g2.json" 2>&1 | grep -E "^(train|RESULT|  )|rror"
    "$PY" perf/dali_gpu.py --data /tmp/ddl_jpeg --only train --rounds 2 "${DALI_CASES[@]}" \
        --train-cases "synthetic,dali-file,${best%%,*}" \
        --runs-root "$OUT/dali_runs" --json "$OUT/dali_confirm_g1.json" 2>&1 | grep -E "^(train|RESULT|  )|rror"
    ;;
  *) echo "unknown phase $phase: choose ds, ds-trace, comm, dali, dali-confirm, hvd, breakdown or stash" >&2; exit 2 ;;
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
