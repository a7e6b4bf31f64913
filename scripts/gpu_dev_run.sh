#!/usr/bin/env bash
# One run on the GPU machine while developing the rmsnorm CUDA kernel: build the variant
# for this GPU, show registers/spills and the SASS load/store forms, check that
# a failing op raises (not crashes), then tests + benchmark (gpu_bench.sh).
#   scripts/gpu_dev_run.sh [study.py args...]
# On the GPU machine, with .whl/ copied there: bash scripts/gpu_dev_run.sh
# Files under $OUT (8 at most come back): build.log, env.txt, tests.log,
# bench.log, results.json, rmsnorm.png.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpu-bench-out}; mkdir -p "$out"
export MAX_JOBS=16 PYTHONUNBUFFERED=1
python3 "$root/scripts/gpu_dev_build.py" "$root/kernel_projects/rmsnorm" --verbose \
  >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
grep -E "registers|spill|stack" "$out/build.log" | sort | uniq -c | sort -rn | head -8
so=$(ls "$root"/kernel_projects/rmsnorm/build/*cu*/*.so)
cuobjdump --dump-sass "$so" > /tmp/sass.txt
echo "SASS global accesses, local-memory instructions, PDL instructions:"
grep -oE "(LDG|STG)\.E[.A-Z0-9]*" /tmp/sass.txt | sort | uniq -c
grep -cE "LDL|STL" /tmp/sass.txt
grep -oE "ACQBULK|PREEXIT" /tmp/sass.txt | sort | uniq -c
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$root"/.whl/*.whl && export PYTHONPATH=/tmp/site
export LOCAL_KERNELS="your-hf-org/rmsnorm=$root/kernel_projects/rmsnorm/build"
# An op that raises must raise, not crash (a newer g++ than the loaded libstdc++ once made it crash).
python3 - <<'PY' || echo "rms_norm with a wrong weight shape CRASHED"
import kernels, torch
k = kernels.get_kernel("your-hf-org/rmsnorm", version=1)
try:
    k.rms_norm(torch.randn(4, 128, device="cuda", dtype=torch.bfloat16), torch.ones(64, device="cuda", dtype=torch.bfloat16), 1e-6)
except RuntimeError as e:
    print("rms_norm raised as it should:", str(e).splitlines()[0])
PY
"$root/scripts/gpu_bench.sh" "$root/kernel_projects/rmsnorm/build" "$@"
