#!/usr/bin/env bash
# One device call while developing the rmsnorm CUDA kernel: build the variant
# for this GPU (with the launch-shape tuning op), show registers/spills and the
# SASS load widths, sweep launch shapes, then tests + benchmark (gpu_bench.sh).
#   scripts/gpu_dev_run.sh [--no-tune] [benchmark.py args...]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-bench-out}; mkdir -p "$out"
tune=1; [ "${1:-}" = --no-tune ] && { tune=0; shift; }
export MAX_JOBS=16 PYTHONUNBUFFERED=1
python3 "$root/scripts/gpu_dev_build.py" "$root/kernel_projects/rmsnorm" --define RMSNORM_TUNING --verbose \
  >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
grep -E "registers|spill|stack" "$out/build.log" | sort | uniq -c | sort -rn | head -20
so=$(ls "$root"/kernel_projects/rmsnorm/build/*cu*/*.so)
cuobjdump --dump-sass "$so" > /tmp/sass.txt
echo "SASS global access widths:"; grep -oE "(LDG|STG)\.E[.A-Z0-9]*" /tmp/sass.txt | sort | uniq -c
grep -cE "LDL|STL" /tmp/sass.txt | sed 's/^/local-memory instructions: /'
if [ $tune = 1 ]; then
  ls "$root"/.whl/*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site "$root"/.whl/*.whl && export PYTHONPATH=/tmp/site
  LOCAL_KERNELS="kernels-publisher/rmsnorm=$root/kernel_projects/rmsnorm/build" \
    python3 "$root/kernel_projects/rmsnorm/benchmarks/benchmark.py" --tune --dtypes bfloat16,float32 2>&1 | tee "$out/tune.log"
fi
"$root/scripts/gpu_bench.sh" "$root/kernel_projects/rmsnorm/build" "$@"
