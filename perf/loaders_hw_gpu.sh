#!/usr/bin/env bash
# One device call (nvidia-h200), issue 21: native_gpu with nvImageCodec's hardware JPEG decoder
# (loader.gpu_decoder=nvimgcodec) beside torchvision's decode_jpeg, on the JPEGs perf/loaders_gpu.sh uses
# (4,096 of 500x375, quality 94, /tmp/ddl_jpeg), ResNet-50 bf16 batch 256 on one GPU:
#   1. perf/nvimgcodec_probe.py: versions, the NVJPG engines nvJPEG reports, one batch decoded both ways;
#   2. training, one run per variant (15 warm-up + 60 measured steps, the trace window on), ratios to
#      synthetic in the same call (goal: native_gpu >= 0.90), and the img/s of the measured steps' second
#      half alone (late_half_img_s: a loader's own pace once the batches queued before the window are spent);
#   3. `ddlbench loaderbench` at 15 workers: native_gpu both ways and the decode ceilings side by side
#      (device_decode[_only], nvimgcodec_decode, nvimgcodec_decode_only_hw1/0.65/0).
# Prints `RESULT <variant> img_s=<..> ratio=<..> idle=<..>` lines; everything is also in $OUT/log.txt and the
# runs' logs in $OUT/logs/. A variant that fails or runs past RUN_TIMEOUT_S is reported and the rest go on;
# past BUDGET_S the remaining variants are skipped, so the call ends with its RESULT lines.
# Libraries (nothing is downloaded there):
#   - with DALI (the dali variant, and nvImageCodec with it): stage .devwheels/dali-slim/part.00 .. part.02
#     into /tmp/stage in the three calls before this one (carry [".devwheels/dali-slim/part.0N"], command:
#     mkdir -p /tmp/stage && cp .devwheels/dali-slim/part.0N /tmp/stage/), then carry
#     [".devwheels/dali-slim/part.03", ".devwheels/base"] here;
#   - without DALI, one call: carry [".devwheels/nvimgcodec", ".devwheels/base"] (nvidia-nvimgcodec-cu13 and
#     nvidia-nvjpeg wheels, ~29 MB); the dali variant is then skipped.
#   bash perf/loaders_hw_gpu.sh
# Knobs: VARIANTS (all of VARIANT_ORDER) ROUNDS (1) WARMUP (15) STEPS (60) LB_WORKERS (15) LOADERBENCH (1)
#        LB_LOADERS (native_gpu,native_gpu-nvimgcodec) PROBE (1: perf/nvimgcodec_probe.py)
#        RUN_TIMEOUT_S (150) BUDGET_S (400: no new variant starts after it)
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/logs"

main() {
source perf/device_env.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
date -u +"%Y-%m-%dT%H:%M:%SZ"
if ls /tmp/stage/part.0* .devwheels/dali-slim/part.0* >/dev/null 2>&1; then
    tools/dali_slim.sh install 2>&1 | tail -1
fi
if ! "$PY" -c 'import nvidia.nvimgcodec' 2>/dev/null && ls .devwheels/nvimgcodec/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .devwheels/nvimgcodec/*.whl \
        && echo "nvImageCodec installed into $SITE from .devwheels/nvimgcodec"
fi

# name -> overrides; the order is the order they run in (the ones the issue turns on first)
declare -A VARIANT=(
    [synthetic]="loader=synthetic"
    [native_gpu_torchvision]="loader=native_gpu"
    [native_gpu_nvimgcodec]="loader=native_gpu loader.gpu_decoder=nvimgcodec"
    [dali]="loader=dali"
    [native]="loader=native"
    [native_gpu_nvimgcodec_hw0.65]="loader=native_gpu loader.gpu_decoder=nvimgcodec loader.hw_decoder_load=0.65"
)
VARIANT_ORDER=(synthetic native_gpu_torchvision dali native native_gpu_nvimgcodec native_gpu_nvimgcodec_hw0.65)
read -ra VARIANTS <<< "${VARIANTS:-${VARIANT_ORDER[*]}}"
for name in "${VARIANTS[@]}"; do  # an unknown name would run with no loader override: refuse it
    [[ -n ${VARIANT[$name]+set} ]] || { echo "VARIANTS: '$name' is no variant; choose from ${VARIANT_ORDER[*]}" >&2; exit 2; }
done
if ! "$PY" -c 'import nvidia.dali' 2>/dev/null; then
    echo "DALI does not import: the dali variant is skipped"
    VARIANTS=("${VARIANTS[@]/dali/}")
fi

DATA=/tmp/ddl_jpeg
[[ -d $DATA ]] || "$PY" perf/dali_gpu.py --data "$DATA" --make-data 4096 --quality 94 --only data
"$PY" -c "import os, sys; s = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(sys.argv[1]) for f in fs]; print(f'{len(s)} JPEGs, mean {sum(s) / len(s) / 1e3:.0f} KB')" "$DATA"

echo "== probe"
[[ ${PROBE:-1} == 1 ]] && timeout 120 "$PY" perf/nvimgcodec_probe.py --data "$DATA" --batch 256 2>&1 | grep -E "^PROBE|Error|error" | head -20

ROOT=$OUT/runs
COMMON=(system=h200 precision=amp_bf16 model=resnet model.depth=50 run.per_gpu_batch=256 "run.warmup_steps=${WARMUP:-15}"
        "run.steps=${STEPS:-60}" run.log_every=0 run.campaign=loaders_hw "data.path=$DATA")
train() {  # train NAME ROUND: one run into $ROOT/NAME-rROUND, its log in $OUT/logs
    local name=$1 round=$2 start=$SECONDS rc
    read -ra overrides <<< "${VARIANT[$name]}"
    timeout -k 20 "${RUN_TIMEOUT_S:-150}" "$PY" -m ddlbench.cli run "${COMMON[@]}" "run.dir=$ROOT/$name-r$round" \
        "${overrides[@]}" > "$OUT/logs/$name-r$round.log" 2>&1
    rc=$?
    echo "$name $round $rc" >> "$OUT/attempts.txt"
    echo "== $name round $round: rc $rc, wall $((SECONDS - start)) s"
    grep -E "done:|rror|warning" "$OUT/logs/$name-r$round.log" | sed 's/ -> .*//' | tail -4
}
echo "== training (${VARIANTS[*]})"
for round in $(seq 0 $(( ${ROUNDS:-1} - 1 ))); do
    for name in "${VARIANTS[@]}"; do
        [[ -n $name ]] || continue
        if (( SECONDS > ${BUDGET_S:-400} )); then
            echo "== $name round $round: skipped, the call's budget (${BUDGET_S:-400} s) is spent"
            continue
        fi
        train "$name" "$round"
    done
done

touch "$OUT/attempts.txt"
"$PY" - "$ROOT" "$OUT/attempts.txt" <<'PY'
import json, statistics, sys
from pathlib import Path

runs = {}
for line in Path(sys.argv[2]).read_text().splitlines():  # the runs in the order they ran
    name, round_, rc = line.split()
    d = Path(sys.argv[1]) / f"{name}-r{round_}"
    s = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {}
    if s.get("status") != "completed":
        print(f"RESULT {name} failed (rc {rc}, {s.get('status', 'no summary')}; see logs/{d.name}.log)")
        continue
    breakdown = d / "breakdown_rank0.json"
    trace = json.loads(breakdown.read_text()).get("trace", {}) if breakdown.exists() else {}
    idle = trace["idle_s"] / trace["window_s"] if trace.get("window_s") else float("nan")
    loader = json.loads((d / "meta.json").read_text()).get("loader", {}) if (d / "meta.json").exists() else {}
    decoder = ", ".join(str(loader[k]) for k in ("gpu_decoder_library", "gpu_decoder_pool_memory") if k in loader)
    # the measured steps' second half alone: a loader whose queue was full when the window opened shows
    # its own pace there (CUDA-event step times)
    steps = [json.loads(x) for x in (d / "rank0.jsonl").read_text().splitlines() if '"step_s"' in x]
    steps = [r for r in steps if not r.get("warmup") and not r.get("profiled")]
    late = steps[len(steps) // 2:]
    late_img_s = sum(r["samples"] for r in late) / sum(r["step_s"] for r in late) if late else float("nan")
    runs.setdefault(name, []).append((s["throughput_img_s"], idle, decoder, late_img_s))
base = statistics.median(v[0] for v in runs["synthetic"]) if "synthetic" in runs else float("nan")
for name, values in runs.items():
    m = statistics.median(v[0] for v in values)
    idle = statistics.median(v[1] for v in values)
    late = statistics.median(v[3] for v in values)
    print(f"RESULT {name} img_s={m:.1f} ratio={m / base:.3f} idle={idle:.3f} late_half_img_s={late:.1f} "
          f"runs={','.join(f'{v[0]:.1f}' for v in values)}"
          + (f" ({values[0][2]})" if values[0][2] else ""))
PY

if [[ ${LOADERBENCH:-1} == 1 ]] && (( SECONDS < ${BUDGET_S:-400} + 60 )); then
    echo "== loaders alone and the decode ceilings"
    LB=${LB_LOADERS:-native_gpu,native_gpu-nvimgcodec}
    timeout -k 20 150 "$PY" -m ddlbench loaderbench system=h200 "data.path=$DATA" run.per_gpu_batch=256 --loaders "$LB" \
        --workers "${LB_WORKERS:-15}" --batches 10 --warmup 3 --out "$OUT/loaderbench" 2>&1 \
        | grep -v "^\[ddlbench\] loaderbench \|Warning\|warn("
else
    echo "== loaderbench skipped (LOADERBENCH=${LOADERBENCH:-1}, ${SECONDS} s spent)"
fi
echo "== done in ${SECONDS} s"
}

main 2>&1 | tee -a "$OUT/log.txt"
