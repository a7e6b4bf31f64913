#!/usr/bin/env bash
# Developer script, for the GPU machine: the example kernel against its peers, on the GPU and on the
# machine's CPU cores, loaded as users load them (kernels). From the repository root, with the bundle
# carried:
#   bash scripts/gpu_rmsnorm_study.sh
# $BUNDLE/whl: the kernels client and its dependencies (the machine has no index).
# $BUNDLE/rms/ours: kernel_projects/rmsnorm with build/ holding its variants for the machine's torch.
# $BUNDLE/rms/peers/NAME: the peers' kernel-builder folders, as their authors publish them
#   (kernels-community's liger-kernels source; kernels-community's rmsnorm with its cpu variant built).
# $BUNDLE/rms/launch_sweep (optional): kernel_projects/rmsnorm/benchmarks/launch_sweep.cu, compiled.
# Everything lands in $OUT: tests-*.log, sweep.jsonl, results*.json, the figures, study-*.log.
set -uo pipefail
BUNDLE=${BUNDLE:-.gpu-bundle}
OUT=${OUT:-/tmp/out}
STEPS=${STEPS:-tests,sweep,cpu,gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$BUNDLE"/whl/*.whl
export PYTHONPATH=/tmp/site
ours=$(cd "$BUNDLE/rms/ours" && pwd)
peers=$(cd "$BUNDLE/rms/peers" && pwd)
# The CPU runs resolve the cpu variant alone: a CUDA build of torch would pick its CUDA variant.
cpu_build=$(mktemp -d)
cp -r "$ours"/build/*-cpu-* "$cpu_build/"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-400
  python3 -c 'import torch; print("torch", torch.__version__, "threads", torch.get_num_threads(), torch.backends.cpu.get_cpu_capability())'
  ls "$ours/build"; } | tee "$OUT/env.txt"
has() { [[ ",$STEPS," == *",$1,"* ]]; }

if has tests; then
  tmp=$(mktemp -d)
  (cd "$tmp" && LOCAL_KERNELS="your-hf-org/rmsnorm=$ours/build" python3 -m pytest -q -p no:cacheprovider "$ours/tests" 2>&1) \
    > "$OUT/tests-cuda.log"; tail -2 "$OUT/tests-cuda.log"
  (cd "$tmp" && CUDA_VISIBLE_DEVICES= LOCAL_KERNELS="your-hf-org/rmsnorm=$cpu_build" \
    python3 -m pytest -q -p no:cacheprovider -rs "$ours/tests" 2>&1) > "$OUT/tests-cpu.log"; tail -4 "$OUT/tests-cpu.log"
fi
if has sweep && [ -x "$BUNDLE/rms/launch_sweep" ]; then
  "$BUNDLE/rms/launch_sweep" > "$OUT/sweep.jsonl"; echo "sweep: $(wc -l < "$OUT/sweep.jsonl") lines"
fi
if has gpu; then
  LOCAL_KERNELS="your-hf-org/rmsnorm=$ours/build" python3 "$ours/benchmarks/study.py" \
    --peer "liger=$peers/liger-kernels" --out "$OUT" ${GPU_ARGS:-} > "$OUT/study-gpu.log" 2>&1
  echo "gpu study rc=$?"; grep -v Warning "$OUT/study-gpu.log" | tail -120
fi
if has cpu; then
  CUDA_VISIBLE_DEVICES= LOCAL_KERNELS="your-hf-org/rmsnorm=$cpu_build" python3 "$ours/benchmarks/study.py" --device cpu \
    --peer "rmsnorm=$peers/rmsnorm" --out "$OUT" ${CPU_ARGS:-} > "$OUT/study-cpu.log" 2>&1
  echo "cpu study rc=$?"; grep -v Warning "$OUT/study-cpu.log" | tail -70
fi
