#!/usr/bin/env bash
# Developer script, for the GPU machine: Deformable-DETR's ops (fundamentalvision/Deformable-DETR models/ops,
# unmodified, then `publisher adopt --force` on the CPU machine, carried as .gpu-bundle/adopted/deformable-detr-ops)
# built with `publisher build --local`, tested with `publisher test`, then the project's own test.py (forward
# against its pure-PyTorch reference in double and float, gradcheck) run against the kernel loaded through
# `kernels` (its `functions` package, now the kernel's subpackage, stands in for the installed one).
set -uo pipefail
BUNDLE=${BUNDLE:-.gpu-bundle}
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$BUNDLE"/whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
work=$(mktemp -d)
cp -r "$BUNDLE/adopted/deformable-detr-ops" "$work/ops"
publisher build "$work/ops" --local --no-hub-cache 2>&1 | tail -3
publisher test "$work/ops" 2>&1 | tail -4
cd "$work/ops" && python3 - <<'PY'
import importlib, pathlib, runpy, sys
import kernels
k = kernels.get_local_kernel(pathlib.Path("build"))
for name in ("functions", "functions.ms_deform_attn_func"):
    sys.modules[name] = importlib.import_module(f"{k.__name__}.{name}")
print("kernel", k.__name__, "ops", [n for n in dir(k) if n.startswith("ms_")])
runpy.run_path("test.py", run_name="__main__")
PY
