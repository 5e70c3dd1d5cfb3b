#!/usr/bin/env bash
# One device call (nvidia-h200, its torch): a CPU run's ranks forked from torchrun's agent (JobShape.fork_ranks)
# where no GPU driver is, and fresh ranks everywhere on the device machine (ranks_may_fork), on its torch.
#   1. torchrun knows --run-path and --start-method (the forked ranks' argv);
#   2. a CPU run here: fresh ranks (`-m benchmarks`);
#   3. DDP and DeepSpeed ZeRO-1 on 2 CPU ranks, forked, as where no GPU driver is (CUDA hidden);
#   4. a GPU run (ResNet-50 bf16, synthetic data): fresh ranks, and it trains.
# Carry .devwheels/deepspeed.   bash perf/fork_ranks_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source perf/device_env.sh
with_deepspeed
machine_lines
echo "== torchrun's options for forked ranks"
"$PY" -m torch.distributed.run --help | grep -E -- "--run-path|--start-method" | head -4

ROOT=$OUT/runs
echo "== a CPU run on this GPU machine: fresh ranks (ranks_may_fork)"
"$PY" -m ddlbench.cli run model=simple_cnn loader=synthetic run.per_gpu_batch=8 run.steps=5 run.warmup_steps=1 \
    system.ranks_per_node=2 "run.root=$ROOT" run.campaign=cpu 2>&1 | grep -E "^\[ddlbench\] /|done:|rror" | sed 's/ model=.*//'
# forked ranks on this torch, as on a machine without a GPU driver: CUDA hidden, the driver check answered no
forked_run() {
    CUDA_VISIBLE_DEVICES= "$PY" - "$@" <<'PYEOF' 2>&1 | grep -E "^\[ddlbench\] /|done:|rror" | sed 's/ model=.*//'
import sys
import launchers.local
launchers.local.gpu_driver = lambda: False
from ddlbench.cli import main
sys.exit(main(["run", "model=simple_cnn", "loader=synthetic", "run.per_gpu_batch=8", "run.steps=5",
               "run.warmup_steps=1", "system.ranks_per_node=2", *sys.argv[1:]]))
PYEOF
}
echo "== forked ranks, DDP, 2 CPU ranks"
forked_run "run.root=$ROOT" run.campaign=forked
echo "== forked ranks, DeepSpeed ZeRO-1, 2 CPU ranks"
forked_run framework=deepspeed framework.zero_stage=1 "run.root=$ROOT" run.campaign=forked
echo "== a GPU run: fresh ranks"
"$PY" -m ddlbench.cli run system=h200 precision=amp_bf16 model=resnet model.depth=50 loader=synthetic \
    run.per_gpu_batch=64 run.steps=20 run.warmup_steps=5 run.log_every=0 "run.root=$ROOT" 2>&1 \
    | grep -E "^\[ddlbench\] /|done:|rror" | sed 's/ system=h200.*//'
