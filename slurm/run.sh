#!/bin/bash
# One ddlbench run as a Slurm batch job; arguments are Hydra overrides, passed on untouched:
#   sbatch slurm/run.sh framework=ddp loader=synthetic model=simple_cnn system=slurm_cpu
#   sbatch --nodes=4 --ntasks-per-node=4 --gres=gpu:4 --account=<project> \
#          slurm/run.sh system=juwels_booster framework=horovod loader=dali model.depth=50
# sbatch flags on the command line override the defaults below. Set DDLBENCH_PYTHON to the Python
# that has ddlbench installed if `python3` on the compute nodes is not it.
#SBATCH --job-name=ddlbench
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --cpus-per-task=1
#SBATCH --time=00:30:00
#SBATCH --output=slurm-%x-%j.out
set -euo pipefail

# the system profile's prelude (system.prelude: module loads, ...), written by `ddlbench campaign submit`
if [[ -n ${DDLBENCH_PRELUDE:-} ]]; then
    # module init scripts read unset variables: not under set -u
    set +u
    # shellcheck disable=SC1090
    source "$DDLBENCH_PRELUDE"
    set -u
fi
PY=${DDLBENCH_PYTHON:-python3}
if ! "$PY" -c "import launchers.slurm" 2>/dev/null; then
    echo "ddlbench: error: DDLBENCH_PYTHON=$PY cannot import ddlbench; set DDLBENCH_PYTHON to the venv's python (e.g. ~/.cache/ddlbench/venv-*/bin/python)" >&2
    exit 2
fi
# everything else (config, run directory, srun/mpirun command, environment, exit status) is Python:
# the overrides travel as separate arguments ("$@"), never through a shell's word splitting
exec "$PY" -m launchers.slurm launch "$@"
