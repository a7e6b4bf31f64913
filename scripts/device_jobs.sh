#!/usr/bin/env bash
# Developer script, run on the GPU machine: prove `publisher test --on
# hf-jobs:FLAVOUR` on real hardware. `publisher hub-server` answers the Jobs API with the process
# executor (the job runs on this machine, its GPU visible), the example rmsnorm is built here for the
# machine's torch (matrix $MATRIX), then tested: its cpu variant here with the GPU hidden, its CUDA
# variant in a job on flavour h200 (the H100 stands in); the card lines the report gives are printed;
# then `publisher bench` of the CUDA variant here and in a job, and the card section of both.
# Needs .whl/ (publisher's dependencies as wheels) and $MATRIX copied there.
set -euo pipefail
MATRIX=${MATRIX:-.gpu-bundle/gpu-box.yaml}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
work=$(mktemp -d)
cp -r kernel_projects/rmsnorm "$work/rmsnorm" && rm -rf "$work/rmsnorm/build"
. "$(dirname "${BASH_SOURCE[0]}")/hub_server.sh"
start_hub_server "$work" || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
time publisher build "$work/rmsnorm" --matrix "$MATRIX" 2>&1 | tail -4
set +e
time publisher test "$work/rmsnorm" --matrix "$MATRIX" --on hf-jobs:h200 --job-timeout 20m 2>&1 | grep -v "Requirement already" | tee "$OUT/test.log"
echo "test exit: ${PIPESTATUS[0]}"
set -e
cp "$work/rmsnorm/build/.publisher/test-report.json" "$OUT/"
python3 - "$OUT/test-report.json" <<'PY' | tee "$OUT/card-lines.txt"
import json, sys
from publisher.push.card import describe_test
for name, entry in json.load(open(sys.argv[1]))["variants"].items():
    print(f"{name}: {describe_test(entry)}")
PY
# publisher bench: here (this GPU), then in a job on the same flavour; both results go to the card
for where in "" "--on hf-jobs:h200"; do
  echo "== publisher bench $where"
  time publisher bench "$work/rmsnorm" --variant '*cu130*' $where 2>&1 | grep -v "Requirement already\|Retrying\|^\[h200\]     " | tee -a "$OUT/bench.log"
done
cp -r "$work/rmsnorm/build/.publisher/bench" "$OUT/bench" || true
python3 - "$work/rmsnorm" <<'PY' | tee "$OUT/card-bench.md"
import sys
import tempfile
from pathlib import Path
from publisher.bench.card import card_section
root = Path(sys.argv[1])
variants = {p.name: p for p in (root / "build").glob("torch*")}
section = card_section(root / "build", variants, Path(tempfile.mkdtemp()))
print(section.markdown if section else "(no current results)")
PY
