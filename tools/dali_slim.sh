#!/usr/bin/env bash
# DALI for the GPU machine in 4 device calls instead of 5: the wheels of .devwheels/dali/wheels (made by
# pip download for the GPU machine's Python 3.12) unpacked, without the builds for other Pythons, tests and
# tools, as one xz tarball split into 4 parts (~44 MB each: with the checkout's ~10 MB, under one call's 64 MiB).
#   tools/dali_slim.sh prepare       # here: .devwheels/dali/wheels -> .devwheels/dali-slim/part.00..03 (~2 min)
#   tools/dali_slim.sh install       # there: /tmp/stage/part.* (+ the carried ones) -> /tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:?prepare|install} in
  prepare)
    tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
    for w in .devwheels/dali/wheels/*.whl; do python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$tmp/site"; done
    find "$tmp/site" -name '*cpython-3*' ! -name '*cpython-312-*' -delete   # the device runs Python 3.12
    find "$tmp/site" -path '*/tests/*' -delete
    rm -rf "$tmp/site/nvidia/libnvcomp/bin"
    mkdir -p .devwheels/dali-slim && rm -f .devwheels/dali-slim/part.*
    tar cf - -C "$tmp/site" . | xz -T2 -7 > "$tmp/dali.tar.xz"
    split -n 4 -d "$tmp/dali.tar.xz" .devwheels/dali-slim/part.
    ls -la .devwheels/dali-slim
    ;;
  install)
    mkdir -p /tmp/stage /tmp/site && cp .devwheels/dali-slim/part.* /tmp/stage/ 2>/dev/null || true
    [[ $(ls /tmp/stage/part.0* 2>/dev/null | wc -l) == 4 ]] || { echo "dali_slim: /tmp/stage has $(ls /tmp/stage) - carry part.00 .. part.03 in back-to-back calls" >&2; exit 1; }
    cat /tmp/stage/part.0* | python3 -c 'import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode="r|xz").extractall("/tmp/site", filter="tar")'
    echo "DALI unpacked into /tmp/site"
    ;;
esac
