#!/usr/bin/env bash
# Collect, on a machine with a package index, what model=bert needs on the offline GPU machine (python 3.12,
# x86_64, torch and numpy already there) into .devwheels/nlp/ (git-ignored, carried to the device):
# transformers 4.57 and what importing it and building BertForQuestionAnswering loads (huggingface_hub,
# safetensors, tokenizers (imported by transformers' configuration code, though no tokenizer is built),
# regex, requests with urllib3/idna/certifi/charset-normalizer, packaging, pyyaml, tqdm). hf-xet (downloads
# only) is left out. Checked: these alone, beside torch and its own requirements, build and train the model.
#   tools/fetch_nlp_device_inputs.sh [PYTHON_VERSION]     # default 3.12; PYTHON=python3
set -euo pipefail
PYVER=${1:-3.12}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/.devwheels/nlp
PY=${PYTHON:-python3}
mkdir -p "$DEST"
"$PY" -m pip download -q --no-deps --only-binary :all: -d "$DEST" \
    --python-version "$PYVER" --implementation cp --platform manylinux2014_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any \
    transformers==4.57.6 huggingface_hub==0.36.2 safetensors==0.8.0 tokenizers==0.22.2 regex==2026.11.19 requests==2.34.2 \
    urllib3==2.8.0 idna==3.20 certifi==2026.10.19.post1 charset-normalizer==3.5.3 packaging==26.3 \
    pyyaml==6.0.4 tqdm==4.70.1
du -sh "$DEST"
ls -1 "$DEST"
