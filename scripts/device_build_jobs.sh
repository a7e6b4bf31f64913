#!/usr/bin/env bash
# Developer script, run on the GPU machine: the example rmsnorm's matrix
# for that machine ($MATRIX: 2 variants) built locally, then with `publisher build --on
# hf-jobs:cpu-xl --max-parallel 2` against `publisher hub-server --jobs-executor process` (the jobs run
# on the same machine: the ratio is the jobs' overhead on equal cores, not a real flavour's speed).
# Needs .whl/ and $MATRIX copied there.
set -euo pipefail
MATRIX=${MATRIX:-.gpu-bundle/gpu-box.yaml}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
work=$(mktemp -d)
cp -r kernel_projects/rmsnorm "$work/rmsnorm" && rm -rf "$work/rmsnorm/build"
cp "$MATRIX" "$work/matrix.yaml"
. "$(dirname "${BASH_SOURCE[0]}")/hub_server.sh"
start_hub_server "$work" || exit 1
nproc | tee "$OUT/cores.txt"
s=$(date +%s.%N); publisher build "$work/rmsnorm" --matrix "$work/matrix.yaml" --no-hub-cache 2>&1 | tail -4; e=$(date +%s.%N)
echo "local: $(python3 -c "print(round($e - $s, 1))") s" | tee "$OUT/times.txt"
rm -rf "$work/rmsnorm/build"
s=$(date +%s.%N)
publisher build "$work/rmsnorm" --matrix "$work/matrix.yaml" --on hf-jobs:cpu-xl --max-parallel 2 2>&1 \
  | grep -v "Requirement already\|Retrying\|^\[[a-z0-9_-]*\]     " | tail -25
e=$(date +%s.%N)
echo "on hf-jobs:cpu-xl, 2 parallel jobs: $(python3 -c "print(round($e - $s, 1))") s" | tee -a "$OUT/times.txt"
publisher test "$work/rmsnorm" --matrix "$work/matrix.yaml" 2>&1 | tail -4 | tee "$OUT/test.txt"
