# Sourced by the perf/*_gpu.sh scripts: the Python, the offline site folder, and ddlbench's pure-python
# requirements (hydra-core, omegaconf, antlr4, tqdm) when missing, from the carried .devwheels/base (or
# .devwheels/deepspeed, which holds them too).
# Knobs: PYTHON (python3) SITE (/tmp/site).
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0  # NVLink SHARP multicast stays off on the lent machines
mkdir -p "$SITE"
if ! "$PY" -c 'import hydra, omegaconf' 2>/dev/null; then
    wheels=""
    for d in .devwheels/base .devwheels/deepspeed; do [[ -d $d ]] && { wheels=$d; break; }; done
    [[ -n "$wheels" ]] || { echo "hydra-core is missing and neither .devwheels/base nor .devwheels/deepspeed is here" >&2; exit 1; }
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$wheels"/*.whl
fi

# run_cell LABEL OVERRIDES...: one `ddlbench run` with the calling script's COMMON overrides into
# $ROOT/LABEL; prints the run's done/error lines (plus lines matching CELL_LINES) and its wall time
run_cell() {
    local label=$1; shift
    echo "== $label: $*"
    local start=$SECONDS
    "$PY" -m ddlbench.cli run "${COMMON[@]}" "run.dir=$ROOT/$label" "$@" 2>&1 \
        | grep -E "done:|rror${CELL_LINES:+|$CELL_LINES}" || true
    echo "   wall $((SECONDS - start)) s"
}


# with_deepspeed: DeepSpeed from the carried .devwheels/deepspeed, where it is missing
with_deepspeed() {
    with_wheels deepspeed deepspeed
}

# with_wheels MODULE FOLDER: the carried .devwheels/FOLDER into the site folder, where MODULE does not import
# (with_wheels transformers nlp: BERT's library)
with_wheels() {
    if ! "$PY" -c "import $1" 2>/dev/null && [[ -d .devwheels/$2 ]]; then
        timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" ".devwheels/$2"/*.whl
    fi
}

# machine_lines: the GPUs and driver, the time (UTC) and torch's version, for the results' record
machine_lines() {
    nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
    date -u +"%Y-%m-%dT%H:%M:%SZ"
    "$PY" -c "import torch; print('torch', torch.__version__)"
}
