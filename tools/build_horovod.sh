#!/usr/bin/env bash
# Build (once) and install Horovod 0.28.1 for the torch of a given python.
#
#   tools/build_horovod.sh [PYTHON]            # default PYTHON: python3
#
# Horovod's last release (0.28.1, 2023) is source only and does not build against today's torch as
# shipped; the fixes below are the minimal set (docs/horovod.md lists them), each commented with
# its reason. The wheel is cached outside the checkout under
#   ${DDLBENCH_CACHE:-$HOME/.cache/ddlbench}/wheels/<horovod>-torch<ver>-<cuda>-<pytag>-<ops>/
# so only a fresh machine pays for the 8-15 minute build; a rerun installs from the cache.
#
# Operations: gloo-mpi on CPU machines (Gloo + Debian's OpenMPI, installed with apt-get when mpicc is
# missing and we are root), nccl (+ Gloo) when a GPU, nvcc and NCCL headers are present.
# Override with HOROVOD_OPS=gloo-mpi|nccl.
#
# Offline machines: HOROVOD_INPUTS=<folder> holding horovod-0.28.1.tar.gz and wheels of its build
# requirements (cffi, pycparser, ...; see tools/fetch_horovod_device_inputs.sh); nothing is
# downloaded then. HOROVOD_TARGET=<folder>: install there (pip --target, e.g. /tmp/site, on
# PYTHONPATH) instead of into PYTHON's site-packages.
set -euo pipefail

PY=${1:-${PYTHON:-python3}}
HOROVOD_VERSION=0.28.1
CACHE=${DDLBENCH_CACHE:-$HOME/.cache/ddlbench}
INPUTS=${HOROVOD_INPUTS:-}
TARGET=${HOROVOD_TARGET:-}
if [[ -n "$TARGET" ]]; then mkdir -p "$TARGET"; export PYTHONPATH="$TARGET${PYTHONPATH:+:$PYTHONPATH}"; fi
JOBS=${JOBS:-$(nproc)}
CUDA_ROOT=${CUDA_HOME:-}
if [[ -z "$CUDA_ROOT" ]]; then
    for d in /usr/local/cuda /usr/local/cuda-13.0; do [[ -x "$d/bin/nvcc" ]] && { CUDA_ROOT=$d; break; }; done
fi

log() { echo "[build_horovod] $*" >&2; }
die() { echo "[build_horovod] error: $*" >&2; exit 1; }

"$PY" -c 'import torch' 2>/dev/null || die "PYTHON=$PY cannot import torch; install torch first (make venv)"
read -r TORCH_VER CUDA_TAG PYTAG SITE < <("$PY" - <<'EOF'
import os, sys, torch
cuda = "cu" + torch.version.cuda.replace(".", "") if torch.version.cuda else "cpu"
# the folder holding torch is where its nvidia-* wheels (nvidia/nccl) live too
print(torch.__version__.split("+")[0], cuda, f"cp{sys.version_info[0]}{sys.version_info[1]}",
      os.path.dirname(os.path.dirname(torch.__file__)))
EOF
)

# NCCL: the torch venv's nvidia/nccl wheel folder (holds include/nccl.h and lib/libnccl.so.2).
NCCL_DIR=${HOROVOD_NCCL_HOME:-}
if [[ -z "$NCCL_DIR" && -f "$SITE/nvidia/nccl/include/nccl.h" ]]; then NCCL_DIR=$SITE/nvidia/nccl; fi

OPS=${HOROVOD_OPS:-}
if [[ -z "$OPS" ]]; then
    if [[ -n "$CUDA_ROOT" && -n "$NCCL_DIR" && "$CUDA_TAG" != cpu ]] && nvidia-smi -L >/dev/null 2>&1; then
        OPS=nccl
    else
        OPS=gloo-mpi
        # a GPU machine that lacks a part gets a build without NCCL: say which part (ddlbench doctor says it too)
        if nvidia-smi -L >/dev/null 2>&1; then
            [[ -n "$CUDA_ROOT" ]] || log "no NCCL operations: nvcc not found (set CUDA_HOME to the CUDA toolkit)"
            [[ -n "$NCCL_DIR" ]] || log "no NCCL operations: nccl.h not found (set HOROVOD_NCCL_HOME)"
            [[ "$CUDA_TAG" != cpu ]] || log "no NCCL operations: $PY's torch is a CPU build"
        fi
    fi
fi
log "operations: $OPS"
[[ "$OPS" == gloo-mpi || "$OPS" == nccl ]] || die "HOROVOD_OPS=$OPS is not allowed; use gloo-mpi or nccl"

KEY="horovod${HOROVOD_VERSION}-torch${TORCH_VER}-${CUDA_TAG}-${PYTAG}-${OPS}"
WHEEL_DIR="$CACHE/wheels/$KEY"
PIP=("$PY" -m pip)
if [[ -n "$INPUTS" ]]; then PIP_SRC=(--no-index --find-links "$INPUTS"); else PIP_SRC=(); fi
# pip install into PYTHON's site-packages, or into HOROVOD_TARGET
pip_install() {
    if [[ -n "$TARGET" ]]; then
        "${PIP[@]}" install -q "${PIP_SRC[@]}" --no-compile --upgrade --target "$TARGET" "$@"
    else
        "${PIP[@]}" install -q "${PIP_SRC[@]}" "$@"
    fi
}

install_wheel() {
    local whl
    whl=$(ls "$WHEEL_DIR"/horovod-*.whl)
    log "installing $whl"
    pip_install --force-reinstall --no-deps "$whl"
    # runtime requirements, where missing (offline: from INPUTS)
    "$PY" -c 'import cloudpickle, psutil, yaml, packaging' 2>/dev/null || pip_install cloudpickle psutil pyyaml packaging
    "$PY" -c "import horovod.torch as hvd; print('[build_horovod] horovod', __import__('horovod').__version__, 'gloo', hvd.gloo_built(), 'mpi', hvd.mpi_built(), 'nccl', hvd.nccl_built())"
}

# before the cache check: a cached MPI build links libmpi, which a fresh machine lacks until this runs
if [[ "$OPS" == gloo-mpi ]] && ! command -v mpicc >/dev/null; then
    # MPI support needs mpicc/mpirun; Debian's OpenMPI is what the Slurm test cluster uses too.
    [[ $(id -u) == 0 ]] || die "mpicc not found; install OpenMPI (apt-get install -y openmpi-bin libopenmpi-dev) and rerun"
    log "installing OpenMPI (openmpi-bin libopenmpi-dev)"
    apt-get install -y -q openmpi-bin libopenmpi-dev >/dev/null || \
        { apt-get update -q >/dev/null && apt-get install -y -q openmpi-bin libopenmpi-dev >/dev/null; }
fi

if ls "$WHEEL_DIR"/horovod-*.whl >/dev/null 2>&1; then
    log "cached wheel for $KEY"
    install_wheel
    exit 0
fi

log "building $KEY with $JOBS jobs (this takes 2-15 minutes)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# Fix 5: setup.py lists cffi, cloudpickle, psutil, pyyaml, packaging in setup_requires; with
# --no-build-isolation they must already be importable or setuptools tries to fetch eggs.
"$PY" -c 'import cffi, pycparser, cloudpickle, psutil, yaml, packaging, wheel' 2>/dev/null || \
    pip_install cffi pycparser cloudpickle psutil pyyaml packaging wheel

SDIST=""
if [[ -n "$INPUTS" ]]; then
    SDIST=$(ls "$INPUTS"/horovod-"$HOROVOD_VERSION".tar.gz 2>/dev/null || true)
    [[ -n "$SDIST" ]] || die "HOROVOD_INPUTS=$INPUTS has no horovod-$HOROVOD_VERSION.tar.gz; run tools/fetch_horovod_device_inputs.sh"
else
    "${PIP[@]}" download -q --no-binary :all: --no-deps "horovod==$HOROVOD_VERSION" -d "$WORK"
    SDIST=$WORK/horovod-$HOROVOD_VERSION.tar.gz
fi
tar -xzf "$SDIST" -C "$WORK"
SRC=$WORK/horovod-$HOROVOD_VERSION

# patch FILE OLD NEW: literal replacement that must match, so a changed sdist fails loudly.
patch_literal() {
    "$PY" - "$@" <<'EOF'
import pathlib, sys
path, old, new = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
text = path.read_text()
if old not in text:
    sys.exit(f"[build_horovod] error: {path}: expected text not found: {old!r}")
path.write_text(text.replace(old, new))
EOF
}
# Fix 3: torch >= 2.1 headers need C++17 (torch 2.14: C++20, "#error C++20 or later compatible
# compiler is required to use ATen"); 0.28.1 pins C++14 (upstream fixed it after the release).
patch_literal "$SRC/CMakeLists.txt" 'set(CMAKE_CXX_STANDARD 14)' 'set(CMAKE_CXX_STANDARD 17)'
patch_literal "$SRC/CMakeLists.txt" 'set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -std=c++11")' \
                                    'set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -std=c++17")'
patch_literal "$SRC/horovod/torch/CMakeLists.txt" 'set(CMAKE_CXX_STANDARD 14)' 'set(CMAKE_CXX_STANDARD 20)'

export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1
export MAKEFLAGS=-j$JOBS
# Fix 6: CMake 4 refuses gloo's cmake_minimum_required(2.8.12); harmless on CMake 3.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
# Fix 7: g++ 13 no longer includes <string>/<cstdint> transitively (group_table.h fails).
export CXXFLAGS="${CXXFLAGS:-} -include cstdint -include string"
if [[ -n "$CUDA_ROOT" ]]; then
    # Fixes 1-2: a CUDA build of torch makes Horovod's CMake add CUDA even for CPU ops; it needs the
    # toolkit root (lib64/libcudart.so) or fails with "Could NOT find CUDAToolkit"/"cudart NOTFOUND".
    export CUDA_HOME=$CUDA_ROOT CUDAToolkit_ROOT=$CUDA_ROOT PATH=$CUDA_ROOT/bin:$PATH
fi
if [[ "$OPS" == gloo-mpi ]]; then
    export HOROVOD_WITH_MPI=1
    unset HOROVOD_GPU_OPERATIONS
else
    export HOROVOD_WITHOUT_MPI=1 HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
    export HOROVOD_BUILD_CUDA_CC_LIST=${HOROVOD_BUILD_CUDA_CC_LIST:-90}
    # Horovod's FindNCCL wants lib/libnccl.so; the nvidia-nccl wheel ships only libnccl.so.2.
    # Point it at a shadow folder instead of writing into the venv.
    mkdir -p "$WORK/nccl/lib"
    ln -s "$NCCL_DIR/include" "$WORK/nccl/include"
    for f in "$NCCL_DIR"/lib/libnccl.so*; do ln -s "$f" "$WORK/nccl/lib/"; done
    [[ -e "$WORK/nccl/lib/libnccl.so" ]] || ln -s "$NCCL_DIR/lib/libnccl.so.2" "$WORK/nccl/lib/libnccl.so"
    export HOROVOD_NCCL_HOME=$WORK/nccl
fi

mkdir -p "$CACHE/wheels"
BUILD_LOG="$CACHE/wheels/$KEY.log"
log "log: $BUILD_LOG"
start=$SECONDS
# Fix 4: --no-build-isolation so the extension compiles against the torch that will run it.
if ! "${PIP[@]}" wheel -v --no-build-isolation --no-deps "${PIP_SRC[@]}" -w "$WORK/dist" "$SRC" >"$BUILD_LOG" 2>&1; then
    tail -n 40 "$BUILD_LOG" >&2
    die "horovod build failed; full log: $BUILD_LOG"
fi
mkdir -p "$WHEEL_DIR"
mv "$WORK"/dist/horovod-*.whl "$WHEEL_DIR/"
log "built in $((SECONDS - start)) s: $(ls "$WHEEL_DIR")"
install_wheel
