#!/usr/bin/env bash
# One device call while developing the rmsnorm CUDA kernel: build the variant
# for this GPU (with the launch-shape tuning op), show registers/spills and the
# SASS load widths, sweep launch shapes, then tests + benchmark (gpu_bench.sh).
#   scripts/gpu_dev_run.sh [--no-tune] [benchmark.py args...]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gpu-bench-out}; mkdir -p "$out"
tune=1; [ "${1:-}" = --no-tune ] && { tune=0; shift; }
export MAX_JOBS=16 PYTHONUNBUFFERED=1
python3 "$root/scripts/gpu_dev_build.py" "$root/kernel_projects/rmsnorm" --define RMSNORM_TUNING --verbose \
  >"$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
grep -E "registers|spill|stack" "$out/build.log" | sort | uniq -c | sort -rn | head -20
so=$(ls "$root"/kernel_projects/rmsnorm/build/*cu*/*.so)
cuobjdump --dump-sass "$so" > /tmp/sass.txt
echo "SASS global access widths:"; grep -oE "(LDG|STG)\.E[.A-Z0-9]*" /tmp/sass.txt | sort | uniq -c
grep -cE "LDL|STL" /tmp/sass.txt | sed 's/^/local-memory instructions: /'
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$root"/.whl/*.whl && export PYTHONPATH=/tmp/site
if [ $tune = 1 ]; then
  LOCAL_KERNELS="kernels-publisher/rmsnorm=$root/kernel_projects/rmsnorm/build" \
    python3 "$root/kernel_projects/rmsnorm/benchmarks/benchmark.py" --tune --dtypes bfloat16,float32 2>&1 | tee "$out/tune.log"
fi
# An op that raises must raise, not crash: if it crashes, keep the host backtrace.
cat > /tmp/raise.py <<'PY'
import sys, kernels, torch
if sys.argv[1:] == ["torch"]:
    try:
        torch.ones(2, device="cuda") + torch.ones(3, device="cuda")
    except RuntimeError as e:
        print("torch's own error raised:", str(e).splitlines()[0])
    sys.exit(0)
k = kernels.get_kernel("kernels-publisher/rmsnorm", version=1)
x = torch.randn(4, 128, device="cuda", dtype=torch.bfloat16)
try:
    k.rms_norm(x, torch.ones(64, device="cuda", dtype=torch.bfloat16), 1e-6)
except RuntimeError as e:
    print("rms_norm raised as it should:", str(e).splitlines()[0])
PY
export PYTHONPATH=/tmp/site LOCAL_KERNELS="kernels-publisher/rmsnorm=$root/kernel_projects/rmsnorm/build"
python3 /tmp/raise.py torch || echo "torch's own error crashed too"
python3 /tmp/raise.py || cuda-gdb -batch -ex run -ex bt --args python3 /tmp/raise.py >"$out/gdb.txt" 2>&1
[ -f "$out/gdb.txt" ] && grep -E "^#[0-9]+ " "$out/gdb.txt" | head -14
TORCH_LOGS=output_code python3 - >"$out/inductor.txt" 2>&1 <<'PY'
import torch
def f(x, w):
    h = x.float(); h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6); return w * h.to(x.dtype)
torch.compile(f)(torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16), torch.randn(4096, device="cuda", dtype=torch.bfloat16))
PY
grep -E "num_warps|XBLOCK|R0_BLOCK|triton_meta|persistent" "$out/inductor.txt" | head -8
(cd /tmp && python3 -m pytest -q -p no:cacheprovider "$root/kernel_projects/rmsnorm/tests" -k "not errors" 2>&1 | tail -3)
"$root/scripts/gpu_bench.sh" "$root/kernel_projects/rmsnorm/build" "$@"
