#!/usr/bin/env bash
# On a GPU machine: run kernel_projects/rmsnorm's tests and benchmark against a
# built variant, loaded the way users load it (kernels.get_kernel + LOCAL_KERNELS).
#
#   scripts/gpu_bench.sh [BUILD_DIR] [study.py args...]
#
# BUILD_DIR defaults to kernel_projects/rmsnorm/build (copy it to the GPU machine).
# Wheels in .whl/ (the `kernels` client, which the GPU image lacks) are installed
# first. Logs, results.json and rmsnorm.png go to $OUT (or /tmp/gpu-bench-out).
# On the GPU machine, with kernel_projects/rmsnorm/build and .whl/ copied there:
#   bash scripts/gpu_bench.sh kernel_projects/rmsnorm/build
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
project=$root/kernel_projects/rmsnorm
build=$(cd "${1:-$project/build}" && pwd) || { echo "no build folder: ${1:-$project/build}" >&2; exit 2; }
shift || true
out=${OUT:-/tmp/gpu-bench-out}
mkdir -p "$out"

if ls "$root"/.whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$root"/.whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -c "import kernels" || { echo "the kernels client is missing: put its wheel in .whl/" >&2; exit 3; }

export LOCAL_KERNELS="your-hf-org/rmsnorm=$build" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/env.txt"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$out/env.txt"
ls "$build" | tee -a "$out/env.txt"

# From a folder outside the source tree, as `publisher test` runs them.
tmp=$(mktemp -d)
(cd "$tmp" && python3 -m pytest -q -p no:cacheprovider "$project/tests" 2>&1) | tee "$out/tests.log"
tests_rc=${PIPESTATUS[0]}

python3 "$project/benchmarks/study.py" --out "$out" "$@" 2>&1 | tee "$out/bench.log"
bench_rc=${PIPESTATUS[0]}
echo "tests rc=$tests_rc benchmark rc=$bench_rc"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
