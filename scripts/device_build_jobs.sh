#!/usr/bin/env bash
# Developer script, for the GPU machine (one call of the device tool): the example rmsnorm's matrix
# for that machine ($MATRIX: 2 variants) built locally, then with `publisher build --on
# hf-jobs:cpu-xl --max-parallel 2` against `publisher hub-server --jobs-executor process` (the jobs run
# on the same machine: the ratio is the jobs' overhead on equal cores, not a real flavour's speed).
# Carry .whl and $MATRIX.
set -euo pipefail
MATRIX=${MATRIX:-.device-carry/gpu-box.yaml}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
work=$(mktemp -d)
cp -r kernel_projects/rmsnorm "$work/rmsnorm" && rm -rf "$work/rmsnorm/build"
cp "$MATRIX" "$work/matrix.yaml"
token="hf_$(python3 -c 'import secrets,string; print("".join(secrets.choice(string.ascii_letters) for _ in range(34)))')"
publisher hub-server --port 0 --data-dir "$work/hub" --token "$token" --jobs-executor process >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -o 'http://127.0.0.1:[0-9]*' "$work/server.log" >/dev/null 2>&1 && break; sleep 0.2; done
export HF_ENDPOINT=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/server.log" | head -1) HF_TOKEN=$token HF_HUB_DISABLE_XET=1
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
