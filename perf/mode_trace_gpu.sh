#!/usr/bin/env bash
# Issue 35 (item 3): where a mode's step time goes beside DDP's, on one H200 (offline: python 3.12, torch 2.11
# cu130): BERT-large QA (batch 32, seq 384, AdamW, bf16) under each of MODES with the sampled trace window kept
# (run.trace=on run.keep_trace=true), then per run: the window's breakdown (breakdown_rank0.json) and the device
# time by kernel class and the 12 longest kernels by name (from trace/rank0.pt.trace.json.gz).
# HOST=1: an explicit window instead (run.profile_steps=[20,22], inside the measured steps), which records the
# host's ops too: then per run also the host time per step by thread, in the top-level ops by name and outside
# any op (Python: hooks, the engine's bookkeeping), which itemises what the device's idle time waits for.
# Carry [".devwheels/deepspeed", ".devwheels/nlp"]:   bash perf/mode_trace_gpu.sh
# Knobs: MODES ("ddp fsdp"; each a framework override list, '+'-joined: "ddp fsdp+framework.shard_unit=root")
# TRACE_STEPS (3) CAP_S (150) HOST (0). Results: docs/results/2026-12-03-h200-frameworks.md
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
source perf/device_env.sh
with_deepspeed
with_wheels transformers nlp
machine_lines
ROOT=$OUT/trace
rm -rf "$ROOT" && mkdir -p "$ROOT"
WINDOW=(run.trace=on "run.trace_steps=${TRACE_STEPS:-3}" run.keep_trace=true)
[[ "${HOST:-0}" == 1 ]] && WINDOW=(run.trace=off "run.profile_steps=[20,$(( 19 + ${TRACE_STEPS:-3} ))]")
for mode in ${MODES:-ddp fsdp}; do
    echo "== $mode"
    # shellcheck disable=SC2046
    timeout -k 10 "${CAP_S:-150}" "$PY" -m ddlbench.cli run system=h200 system.ranks_per_node=1 precision=amp_bf16 \
        loader=synthetic run.warmup_steps=10 run.steps=20 run.log_every=0 "${WINDOW[@]}" \
        model=bert model.size=large optim.name=adamw \
        optim.lr=3e-5 optim.weight_decay=0.01 run.per_gpu_batch=32 "run.dir=$ROOT/${mode//=/-}" \
        $(tr '+' ' ' <<< "framework=$mode") 2>&1 | grep -E "done:|rror" || true
done
"$PY" - "$ROOT" <<'PYEOF'
import collections, gzip, json, sys
from pathlib import Path

for run in sorted(Path(sys.argv[1]).iterdir()):
    breakdown = run / "breakdown_rank0.json"
    if not breakdown.exists():
        print(f"## {run.name}: no breakdown"); continue
    record = json.loads(breakdown.read_text())["trace"]
    steps = len(record["steps"])
    print(f"## {run.name}: {steps} steps, window {record['window_s'] * 1e3 / steps:.1f} ms a step")
    print("   breakdown:", {k: v for k, v in record.items() if k not in ("steps",)})
    events = json.load(gzip.open(run / "trace" / "rank0.pt.trace.json.gz"))["traceEvents"]
    by_cat, by_name, count = collections.Counter(), collections.Counter(), collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            by_cat[e["cat"]] += e.get("dur", 0)
            by_name[e["name"][:90]] += e.get("dur", 0)
            count[e["cat"]] += 1
    for cat, us in by_cat.most_common():
        print(f"   {cat:<11} {us / 1e3 / steps:8.2f} ms a step, {count[cat] / steps:7.0f} a step")
    for name, us in by_name.most_common(12):
        print(f"   {us / 1e3 / steps:8.2f} ms  {name}")
    # the host (HOST=1): per thread, the time in top-level ops (by name) and outside any op
    ops = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops[(e["pid"], e["tid"])].append(e)
    for (pid, tid), evs in sorted(ops.items(), key=lambda kv: -sum(e["dur"] for e in kv[1]))[:3]:
        evs.sort(key=lambda e: e["ts"])
        top, end = [], -1.0
        for e in evs:  # an op inside another (its children) is the outer op's time
            if e["ts"] >= end:
                top.append(e)
                end = e["ts"] + e["dur"]
        span = top[-1]["ts"] + top[-1]["dur"] - top[0]["ts"]
        busy = sum(e["dur"] for e in top)
        names, counts = collections.Counter(), collections.Counter()
        for e in top:
            names[e["name"]] += e["dur"]
            counts[e["name"]] += 1
        print(f"   host thread {tid}: {len(top) / steps:.0f} top-level ops a step, {busy / 1e3 / steps:.1f} ms a step in "
              f"them, {(span - busy) / 1e3 / steps:.1f} ms a step between them (span {span / 1e3 / steps:.1f} ms)")
        for name, us in names.most_common(10):
            print(f"      {us / 1e3 / steps:7.2f} ms  {counts[name] / steps:6.0f}x  {name[:80]}")
PYEOF
} 2>&1 | tee "$OUT/trace.log"
