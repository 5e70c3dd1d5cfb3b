#!/usr/bin/env bash
# Collect, on a machine with internet, what perf/deepspeed_gpu.sh installs on the offline GPU machine
# (python 3.12, x86_64, torch already there) into .devwheels/deepspeed/ (git-ignored, carried to the device):
#  - deepspeed 0.19.8 as a wheel: PyPI ships only an sdist; built with DS_BUILD_OPS=0 it is pure python
#    (no op is precompiled; the adapter needs none: torch optimizer, shm_comm marked unavailable);
#  - its runtime requirements a torch venv lacks (hjson, msgpack, ninja, py-cpuinfo, einops, pydantic
#    + pydantic-core and their typing deps, pyyaml for omegaconf), binary wheels for the device's python, not this one's;
#  - ddlbench's own pure-python requirements (hydra-core, omegaconf, antlr4 runtime, tqdm).
#   tools/fetch_deepspeed_device_inputs.sh [PYTHON_VERSION]     # default 3.12; PYTHON=python3
set -euo pipefail
PYVER=${1:-3.12}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/.devwheels/deepspeed
PY=${PYTHON:-python3}
mkdir -p "$DEST"
DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps --no-build-isolation deepspeed==0.19.8 -w "$DEST" 2>/dev/null \
    || DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps deepspeed==0.19.8 -w "$DEST"
# with dependency resolution for the target platform: pydantic pins its pydantic-core exactly
"$PY" -m pip download -q --only-binary :all: -d "$DEST" \
    --python-version "$PYVER" --implementation cp --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    hjson msgpack ninja py-cpuinfo einops 'pydantic>=2,<3' pyyaml
# antlr4-python3-runtime 4.9.3 (omegaconf's pin) is an sdist: build its pure-python wheel here
"$PY" -m pip wheel -q --no-deps -w "$DEST" hydra-core==1.3.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3 tqdm
du -sh "$DEST"
ls -1 "$DEST"
