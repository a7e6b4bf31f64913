#!/usr/bin/env bash
# Build here, test on a GPU machine: the variant of the H100 test machine
# (torch 2.11 + CUDA 13.0) is built on this (CPU) machine, carried there with
# the wheels that machine lacks, and tested there with --require-gpu.
#
#   scripts/gpu_test.sh [prepare]  build the variant, fill .gpu-bundle/, print the device command
#   scripts/gpu_test.sh device     what runs on the GPU machine (from the repository root)
#   scripts/gpu_test.sh collect DIR  merge the test report the device step returned (in DIR) into
#                                  this project's build/.publisher/test-report.json, so that
#                                  `publisher push` sees the variant as tested on its hardware
#   scripts/gpu_test.sh rehearse   run the device step here, in a scratch copy of the repository,
#                                  with the variant's own toolchain (no GPU: expect "loaded, not run"
#                                  and exit 1 from --require-gpu; everything else is exercised)
#
# Environment: PROJECT (default kernel_projects/rmsnorm), MATRIX (the GPU
# runner's cells, default matrices/gpu-runner-torch211-cu130.yaml), VARIANT
# (default torch211-cxx11-cu130-x86_64-linux, a cell of MATRIX), PYTHON
# (publisher's interpreter here, default .venv/bin/python), OUT (where the
# device step copies its report).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROJECT="${PROJECT:-kernel_projects/rmsnorm}"
MATRIX="${MATRIX:-matrices/gpu-runner-torch211-cu130.yaml}"
VARIANT="${VARIANT:-torch211-cxx11-cu130-x86_64-linux}"
BUNDLE=".gpu-bundle"  # ignored by git (.gitignore); copied to the GPU machine with the working tree
# The GPU machine has torch, pytest, pytest-timeout, huggingface_hub, click, pyyaml,
# packaging and ninja (device/KINDS.md), huggingface_hub 1.x only; these are missing there.
WHEELS=("kernels==0.17.2" "tomlkit==0.15.2" "huggingface_hub==2.4.0" "httpx2==2.16.2" "httpcore2==2.16.2"
        "hf_xet==1.8.0" "kernel-abi-check==0.14.1" "truststore==0.10.5" "click==8.5.1")
DEVICE_PYTHON_VERSION="3.12"

prepare() {
  local python="${PYTHON:-$ROOT/.venv/bin/python}"
  cd "$ROOT"
  echo "== build $VARIANT of $PROJECT here"
  "$python" -m publisher build "$PROJECT" --matrix "$MATRIX" --variant "$VARIANT"

  echo "== fill $BUNDLE/"
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/build" "$BUNDLE/whl"
  cp -a "$PROJECT/build/$VARIANT" "$BUNDLE/build/"
  "$python" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version "$DEVICE_PYTHON_VERSION" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$BUNDLE/whl" "${WHEELS[@]}"
  printf '%s\n' "$PROJECT" >"$BUNDLE/project"
  du -sh "$BUNDLE"

  cat <<EOF

== ready. On the GPU machine, from the repository root, with .gpu-bundle/ copied there:
  bash scripts/gpu_test.sh device
The report comes back in \$OUT (test-report.json, gpu-test.json, the test log).
EOF
}

device() {
  cd "$ROOT"
  local project
  project="$(cat "$BUNDLE/project")"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "${SITE:-/tmp/publisher-site}" "$BUNDLE"/whl/*.whl
  export PYTHONPATH="${SITE:-/tmp/publisher-site}:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONUNBUFFERED=1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  local rc=0 out="${OUT:-/tmp}"
  python3 -m publisher test "$project" --build-dir "$BUNDLE/build" --require-gpu --all-tests --json >"$out/gpu-test.json" || rc=$?
  cat "$out/gpu-test.json"
  cp "$BUNDLE/build/.publisher/test-report.json" "$BUNDLE"/build/.publisher/logs/*.test.log "$out/" || true
  echo "publisher test exit code: $rc"
  return "$rc"
}

collect() {
  local returned="${1:?usage: $0 collect DIR (the folder holding the returned test-report.json)}"
  local python="${PYTHON:-$ROOT/.venv/bin/python}"
  cd "$ROOT"
  "$python" - "$returned/test-report.json" "$PROJECT/build" <<'PY'
import sys
from pathlib import Path

from publisher import state

returned, build = Path(sys.argv[1]), Path(sys.argv[2])
entries = state.read_report(returned)["variants"]
merged = {}
for name, entry in entries.items():
    variant = build / name
    if not (variant / "metadata.json").is_file():
        print(f"skip {name}: not in {build}")
    elif entry.get("fingerprint") != state.variant_fingerprint(variant):
        print(f"skip {name}: the local build differs from the one tested (rebuilt since?)")
    else:
        merged[name] = entry
        print(f"{name}: {entry.get('status')} on {entry.get('device', {}).get('gpu') or 'CPU'}")
state.update_report(state.test_report_path(build), merged)
sys.exit(0 if merged else 1)
PY
}

rehearse() {
  cd "$ROOT"
  [ -d "$BUNDLE/whl" ] || { echo "run 'scripts/gpu_test.sh prepare' first" >&2; exit 2; }
  # A stand-in for the GPU machine's python3: the variant's torch and the packages
  # KINDS.md lists there (pip included), but not the carried ones.
  local venv="${REHEARSAL_VENV:-$HOME/.cache/publisher/gpu-rehearsal}"
  local uv
  uv="$(command -v uv || echo "$ROOT/.venv/bin/uv")"
  if [ ! -x "$venv/bin/python3" ]; then
    "$uv" venv --quiet --seed --python "${PYTHON:-$ROOT/.venv/bin/python}" "$venv"
    "$uv" pip install --quiet --python "$venv/bin/python" "torch==2.11.*" pytest pytest-timeout \
      "huggingface_hub>=1.10" click pyyaml packaging ninja
  fi
  local scratch rc=0
  scratch="$(mktemp -d)"
  # What reaches the GPU machine: tracked and untracked-not-ignored files, plus the bundle folder.
  git ls-files --cached --others --exclude-standard -z | xargs -0 cp --parents -a -t "$scratch/"
  cp -a "$BUNDLE" "$scratch/"
  mkdir -p "$scratch/out"
  echo "== rehearsal in $scratch with $venv/bin/python3"
  (cd "$scratch" && PATH="$venv/bin:$PATH" OUT="$scratch/out" SITE="$scratch/site" bash scripts/gpu_test.sh device) || rc=$?
  ls "$scratch/out"
  rm -rf "$scratch"
  return "$rc"
}

case "${1:-prepare}" in
  prepare) prepare ;;
  device) device ;;
  rehearse) rehearse ;;
  collect) collect "${2:-}" ;;
  *) echo "usage: $0 [prepare|device|collect DIR|rehearse]" >&2; exit 2 ;;
esac
