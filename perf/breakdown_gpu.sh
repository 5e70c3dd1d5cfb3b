#!/usr/bin/env bash
# Where the time goes, on the H200 (issue 7 GPU proof): ResNet-50 bf16 synthetic with a profiler
# window and telemetry, timer vs trace breakdown side by side; commbench on the GPUs present;
# phase-timer / comm-hook overhead.
#   perf/breakdown_gpu.sh          # in the repository root on the GPU machine (python 3.12, torch 2.11)
# Needs hydra-core/omegaconf: from .devwheels/base (see perf/horovod_gpu.sh) when not installed.
# nvidia-ml-py is on the H200 already (telemetry's GPU fields); HTA is used only where installed.
# Knobs: BATCH (256) PYTHON (python3) SITE (/tmp/site) GPUS (all) OUT (/tmp) MAX_BYTES (4 GiB) ROUNDS (3);
# SYSTEM (h200) DEPTH (50) PRECISION (amp_bf16): a CPU smoke test of this script is
#   SYSTEM=local_cpu DEPTH=18 PRECISION=fp32 BATCH=2 GPUS=1 ROUNDS=1 MAX_BYTES=65536 perf/breakdown_gpu.sh
# Goals: timers vs trace within 5 points; ddlbench/bare >= 0.99 (1 GPU); comm hook on/off >= 0.99
# (2 GPUs); commbench busbw at 1 GiB >= 360 GB/s on 2 GPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
source perf/device_env.sh
"$PY" -c 'import torch; print(f"torch {torch.__version__}, {torch.cuda.device_count()} GPU(s)", *[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])'
"$PY" -c 'import pynvml' 2>/dev/null || echo "WARNING: pynvml (nvidia-ml-py) missing: telemetry has psutil fields only"

ROOT=${OUT:-/tmp}/breakdown_gpu
rm -rf "$ROOT"
mkdir -p "$ROOT"
GPUS=${GPUS:-$(nvidia-smi -L | wc -l)}
SYSTEM=${SYSTEM:-h200}
DEPTH=${DEPTH:-50}
PRECISION=${PRECISION:-amp_bf16}
BATCH=${BATCH:-256}
# the profiler window lies in the warm-up, so the measured steps (and img/s) are not profiled
COMMON=("system=$SYSTEM" framework=ddp model=resnet "model.depth=$DEPTH" "precision=$PRECISION" loader=synthetic
        "run.per_gpu_batch=$BATCH" run.warmup_steps=30 run.steps=60 run.log_every=0)
PROFILE=("run.profile_steps=[20,24]" run.telemetry_hz=10)

breakdown() {  # label, ranks
    for ((r = 0; r < $2; r++)); do
        echo "-- $1 rank $r: timers vs trace"
        "$PY" -m analysis.breakdown "$ROOT/$1" --rank "$r" || true
        "$PY" -c 'import hta' 2>/dev/null && "$PY" -m analysis.breakdown_hta "$ROOT/$1" --rank "$r" || true
    done
}
telemetry_summary() {  # label
    "$PY" - "$ROOT/$1" <<'PYEOF'
import json, statistics, sys
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("telemetry_rank*.jsonl")):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    def stat(key, scale=1.0, unit=""):
        values = [r[key] * scale for r in rows if key in r]
        return f"{key} mean {statistics.fmean(values):.1f}{unit} max {max(values):.1f}{unit}" if values else f"{key} -"
    print(f"{path.name}: {len(rows)} samples | " + " | ".join([
        stat("gpu_util_percent", unit="%"), stat("gpu_mem_used_bytes", 1e-9, " GB"), stat("gpu_power_w", unit=" W"),
        stat("gpu_sm_clock_mhz", unit=" MHz"), stat("pcie_rx_bytes_s", 1e-9, " GB/s"), stat("pcie_tx_bytes_s", 1e-9, " GB/s"),
        stat("nvlink_tx_bytes_s", 1e-9, " GB/s"), stat("cpu_percent", unit="%"), stat("rss_bytes", 1e-9, " GB")]))
PYEOF
}

echo "== 1. timers vs trace, telemetry"
run_cell g1 system.ranks_per_node=1 "${PROFILE[@]}"
breakdown g1 1
telemetry_summary g1
run_cell g1-wrapped system.ranks_per_node=1 framework.wrap_single_rank=true "${PROFILE[@]}"
breakdown g1-wrapped 1
if (( GPUS >= 2 )); then
    run_cell g2 system.ranks_per_node=2 "${PROFILE[@]}"
    breakdown g2 2
    telemetry_summary g2
fi

echo "== 2. commbench on $GPUS GPU(s)"
"$PY" -m ddlbench.cli commbench --nproc "$GPUS" --max-bytes "${MAX_BYTES:-4294967296}" --out "$ROOT/commbench-g$GPUS.json" \
    | grep -E "^op|all_reduce .* (1073741824|4294967296) |p2p|h2d" || true
"$PY" - "$ROOT/commbench-g$GPUS.json" <<'PYEOF'
import json, sys
rows = json.load(open(sys.argv[1]))
for r in rows:
    if r["op"] == "all_reduce" and r["size_bytes"] == 2**30:
        print(f"RESULT commbench {r['backend']} all_reduce 1 GiB on {r['world_size']} GPU(s): busbw {r['busbw_gb_s']:.1f} GB/s "
              f"(algbw {r['algbw_gb_s']:.1f})")
PYEOF

echo "== 3. overhead"
"$PY" perf/harness_overhead.py --depth "$DEPTH" --batch "$BATCH" --precision "$PRECISION" --system "$SYSTEM" --rounds "${ROUNDS:-3}" \
    --warmup 20 --steps 60 | grep -E "round|RESULT"
hook_ratio() {  # ranks, extra overrides...: comm hook on vs off, alternating rounds
    local ranks=$1; shift
    for ((i = 0; i < ${ROUNDS:-3}; i++)); do
        run_cell "hook-on-g$ranks-$i" "system.ranks_per_node=$ranks" framework.comm_timer=on "$@" >/dev/null
        run_cell "hook-off-g$ranks-$i" "system.ranks_per_node=$ranks" framework.comm_timer=off "$@" >/dev/null
    done
    "$PY" - "$ROOT" "$ranks" <<'PYEOF'
import json, statistics, sys
from pathlib import Path
root, ranks = Path(sys.argv[1]), sys.argv[2]
def tp(d):
    summary = d / "summary.json"
    return json.loads(summary.read_text()).get("throughput_img_s") if summary.exists() else None
ratios = []
for on in sorted(root.glob(f"hook-on-g{ranks}-*")):
    off = root / on.name.replace("hook-on", "hook-off")
    if tp(on) is None or tp(off) is None:
        print(f"{on.name}: a run failed, see {on} / {off}")
        continue
    ratios.append(tp(on) / tp(off))
    print(f"{on.name}: on {tp(on):,.1f} img/s | off {tp(off):,.1f} img/s | ratio {ratios[-1]:.4f}")
if ratios:
    print(f"RESULT comm hook overhead g{ranks}: median ratio on/off = {statistics.median(ratios):.4f} (goal >= 0.99)")
PYEOF
}
if (( GPUS >= 2 )); then
    hook_ratio 2
else
    hook_ratio 1 framework.wrap_single_rank=true
fi
