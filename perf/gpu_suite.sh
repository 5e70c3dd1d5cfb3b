#!/usr/bin/env bash
# The GPU suite: every README headline a lent H200 re-measures, one run each, side by side (perf/gpu_suite_plan.py
# plans the steps; `python perf/gpu_suite.py plan` prints them with their commands and estimates).
#
# Prepare here, once (a machine with a package index; everything goes to the git-ignored .devwheels/):
#   tools/fetch_deepspeed_device_inputs.sh; tools/fetch_nlp_device_inputs.sh; tools/fetch_horovod_device_inputs.sh
#   tools/dali_slim.sh prepare                              # .devwheels/dali-slim/part.00 .. part.03 (~44 MB each)
#   # Horovod's own benchmark (the sdist has no examples): the `fetch` tool brings github:horovod/horovod, then
#   git --git-dir=<its mirror> show HEAD:examples/pytorch/pytorch_synthetic_benchmark.py > .devwheels/horovod/pytorch_synthetic_benchmark.py
#   # nccl-tests (x2 only): the `fetch` tool brings github:NVIDIA/nccl-tests, then
#   mkdir -p .devwheels/nccl-tests && git --git-dir=<its mirror> archive --format=tar.gz --prefix=nccl-tests/ \
#       -o .devwheels/nccl-tests/nccl-tests.tar.gz HEAD
#
# One GPU (kind nvidia-h200): a call carries at most 64 MiB with the checkout (~9 MB), so DALI's parts travel
# in three staging calls of seconds each, beside the smaller sets; then the two measuring calls:
#   carry [".devwheels/dali-slim/part.00", ".devwheels/deepspeed"]  command: bash perf/gpu_suite.sh stage
#   carry [".devwheels/dali-slim/part.01", ".devwheels/horovod"]    command: bash perf/gpu_suite.sh stage
#   carry [".devwheels/dali-slim/part.02", ".devwheels/base"]       command: bash perf/gpu_suite.sh stage
#   carry [".devwheels/dali-slim/part.03"]   command: SRC_COMMIT=<sha> bash perf/gpu_suite.sh 1   (timeout_s 600)
#   carry [".devwheels/nlp"]                 command: SRC_COMMIT=<sha> bash perf/gpu_suite.sh 2   (timeout_s 600)
# Two GPUs (kind nvidia-h200-x2, when lent; a fresh machine):
#   carry [".devwheels/deepspeed", ".devwheels/horovod", ".devwheels/base", ".devwheels/nccl-tests"]
#                                            command: SRC_COMMIT=<sha> bash perf/gpu_suite.sh x2a
#   carry []                                 command: SRC_COMMIT=<sha> bash perf/gpu_suite.sh x2b
# Back to back: the machine keeps /tmp (the staged sets, /tmp/site, the runs) only while it stays warm.
# Each measuring call leaves in $OUT: suite_call<N>.json (its records), <date>-<kind>-suite.md (the results of
# this call and the earlier ones on the same machine), logs_call<N>.tgz (each command's output), and prints which README
# "Headline figures" rows changed. Here, after the calls: python perf/gpu_suite.py report <the records> --out
# docs/results/<date>-h200-suite.md. The run directories stay on the device.
# Knobs: PYTHON (python3) SITE (/tmp/site) STEPS (a comma list: only these steps of the call).
set -uo pipefail
cd "$(dirname "$0")/.."
call=${1:?usage: perf/gpu_suite.sh stage|1|2|x2a|x2b}
export OUT=${OUT:-/tmp/out}
STAGE=/tmp/stage
mkdir -p "$OUT" "$STAGE"

# stage: what this call carries into /tmp/stage (DALI's parts where tools/dali_slim.sh looks for them)
cp .devwheels/dali-slim/part.* "$STAGE"/ 2>/dev/null
for d in .devwheels/*/; do
    [[ $d == .devwheels/dali-slim/ ]] || cp -r "${d%/}" "$STAGE"/
done
echo "staged: $(ls "$STAGE" | tr '\n' ' ')"
[[ $call == stage ]] && exit 0

PY=${PYTHON:-python3}
export SITE=${SITE:-/tmp/site}
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export TORCH_EXTENSIONS_DIR=/tmp/ddlbench_torch_extensions
mkdir -p "$SITE" "$TORCH_EXTENSIONS_DIR"
install_set() {  # install_set MODULE SET: the staged wheels of SET into $SITE, where MODULE does not import
    if ! "$PY" -c "import $1" 2>/dev/null && ls "$STAGE/$2"/*.whl >/dev/null 2>&1; then
        timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$STAGE/$2"/*.whl
    fi
}
install_set hydra base
install_set hydra deepspeed  # its set holds ddlbench's pure-python requirements too
source perf/device_env.sh    # run_cell and machine_lines; it finds hydra installed now
machine_lines
start=$SECONDS
case $call in
  1)
    install_set deepspeed deepspeed
    # CPU work together before anything is timed: DALI's unpacking, Horovod's build (for call 2), the JPEGs
    tools/dali_slim.sh install > "$OUT/setup_dali.log" 2>&1 &
    HOROVOD_INPUTS=$STAGE/horovod HOROVOD_TARGET=$SITE HOROVOD_OPS=nccl tools/build_horovod.sh "$PY" > "$OUT/setup_horovod.log" 2>&1 &
    [[ -d /tmp/ddl_jpeg ]] || "$PY" perf/dali_gpu.py --data /tmp/ddl_jpeg --make-data 4096 --quality 94 --only data \
        > "$OUT/setup_data.log" 2>&1 &
    wait
    tail -n 2 "$OUT"/setup_*.log
    ;;
  2)
    install_set transformers nlp
    "$PY" -c 'import horovod.torch' 2>/dev/null || echo "horovod does not import: was call 1 on this machine?"
    ;;
  x2a)
    install_set deepspeed deepspeed
    HOROVOD_INPUTS=$STAGE/horovod HOROVOD_TARGET=$SITE HOROVOD_OPS=nccl tools/build_horovod.sh "$PY" > "$OUT/setup_horovod.log" 2>&1 &
    # nccl-tests against the NCCL torch runs on (its wheel's nvidia/nccl: include/nccl.h, lib/libnccl.so.2)
    nccl=$("$PY" -c 'import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "nccl"))')
    mkdir -p /tmp/nccl-home/lib && ln -sf "$nccl/include" /tmp/nccl-home/include
    ln -sf "$nccl"/lib/libnccl.so.2 /tmp/nccl-home/lib/libnccl.so && ln -sf "$nccl"/lib/libnccl.so.2 /tmp/nccl-home/lib/
    (tar -xzf "$STAGE/nccl-tests/nccl-tests.tar.gz" -C /tmp && make -C /tmp/nccl-tests -j 16 MPI=0 \
        NCCL_HOME=/tmp/nccl-home NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90) > "$OUT/setup_nccl_tests.log" 2>&1 &
    wait
    export LD_LIBRARY_PATH=/tmp/nccl-home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    tail -n 2 "$OUT"/setup_*.log
    ;;
  x2b)
    install_set deepspeed deepspeed
    ;;
  *) echo "unknown call $call: stage, 1, 2, x2a or x2b" >&2; exit 2 ;;
esac
echo "setup: $((SECONDS - start)) s"
"$PY" perf/gpu_suite.py run --call "$call" --out "$OUT" --commit "${SRC_COMMIT:-unknown}" --steps "${STEPS:-}" \
    --spent-s "$SECONDS" 2>&1 \
    | tee "$OUT/suite_call$call.log"
rc=$?
# the device brings back at most 8 files from $OUT (a call leaves 15 or more logs): the logs go as one tarball
(cd "$OUT" && logs=$(ls -d logs setup_*.log 2>/dev/null; true) && [[ -n $logs ]] && tar czf "logs_call$call.tgz" $logs && rm -rf $logs)
exit $rc
