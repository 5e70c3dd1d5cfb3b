#!/usr/bin/env bash
# Download, on a machine with internet, what tools/build_horovod.sh needs on the offline GPU machine
# (python 3.12, x86_64) into .devwheels/horovod/ (git-ignored, carried to the device):
# the horovod 0.28.1 sdist, and wheels of its build/runtime requirements that a torch venv may lack.
#   tools/fetch_horovod_device_inputs.sh [PYTHON_VERSION]     # default 3.12
set -euo pipefail
PYVER=${1:-3.12}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/.devwheels/horovod
PY=${PYTHON:-python3}
mkdir -p "$DEST"
"$PY" -m pip download -q --no-binary :all: --no-deps horovod==0.28.1 -d "$DEST"
# setup_requires of horovod (cffi, pycparser, cloudpickle, psutil, pyyaml, packaging) + wheel for
# setuptools builds without build isolation; binary wheels for the device's python, not this one's
"$PY" -m pip download -q --only-binary :all: --no-deps -d "$DEST" \
    --python-version "$PYVER" --implementation cp --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    cffi pycparser cloudpickle psutil pyyaml packaging wheel
ls -1 "$DEST"
