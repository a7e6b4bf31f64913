#!/usr/bin/env bash
# Developer script, for the GPU machine (glibc 2.39, gcc 13, no Docker): what a user does there, with
# nothing installed by hand. For each real kernel-builder project in $BUNDLE/projects/ (unmodified copies)
# and the example kernel: `publisher build --local`, the ABI check of every variant it wrote (0 violations
# wanted), `publisher test`; then `publisher init` -> build --local -> test -> push of a new CUDA kernel to
# `publisher hub-server` (an untrusted org) with the consumer load push makes. The cpu variants built here
# come back as $OUT/cpu-variants.tar.gz, to be loaded and tested on a machine with an older glibc.
#   bash scripts/gpu_local_publish.sh          (from the repository root, .gpu-bundle/ carried)
# $BUNDLE/whl holds publisher's dependencies the machine lacks, and the declared test dependencies of the
# projects (found there through PIP_FIND_LINKS: the machine has no index).
set -uo pipefail
BUNDLE=${BUNDLE:-.gpu-bundle}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$BUNDLE"/whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
export PIP_FIND_LINKS=$PWD/$BUNDLE/test-whl PIP_NO_INDEX=1  # the overlay of declared test dependencies
work=$(mktemp -d)
summary="$OUT/summary.txt"
{ ldd --version | head -1; gcc --version | head -1; nproc; python3 -c 'import torch; print("torch", torch.__version__)'
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$summary"

report() {  # project dir -> one line: variants, ABI violations, test verdicts
  python3 - "$1" <<'PY'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
state = root / "build/.publisher"
def load(name):
    try:
        return json.loads((state / name).read_text())
    except (OSError, ValueError):
        return {}
built = load("build-report.json")
built = built.get("variants", built)
tests = load("test-report.json")
tests = tests.get("variants", tests)
for name, entry in sorted(built.items()):
    if not isinstance(entry, dict):
        continue
    abi = entry.get("abi") or {}
    test = tests.get(name) or {}
    counts = test.get("tests") or {}
    print(f"{root.name} {name} state={entry.get('state')} abi_violations={len(abi.get('violations') or [])} "
          f"test={test.get('status')} passed={counts.get('passed')} failed={counts.get('failed')} "
          f"skipped={counts.get('skipped')} {(test.get('reason') or '')[:160]}")
    for v in (abi.get("violations") or [])[:3]:
        print("   ", v[:200])
PY
}

keep_cpu() {  # the project's cpu variants (and its tests/), into $OUT/cpu-variants.tar.gz, as they come
  mkdir -p "$work/cpu/$1"
  for v in "$work/$1"/build/*-cpu-*; do [ -d "$v" ] && cp -r "$v" "$work/cpu/$1/"; done
  [ -d "$work/$1/tests" ] && cp -r "$work/$1/tests" "$work/cpu/$1/"
  tar -C "$work/cpu" -czf "$OUT/cpu-variants.tar.gz" .
}

if [ "${PUBLISH:-1}" = 1 ]; then  # PUBLISH=0: the projects only
echo "== init -> build --local -> test -> push (hub-server, untrusted org)" | tee -a "$summary"
. "$(dirname "${BASH_SOURCE[0]}")/hub_server.sh"
start_hub_server "$work" || exit 1
(cd "$work" && publisher init gpu-org/fresh-kernel fresh >/dev/null) && {
  # a declared test dependency the machine lacks (torch's own TestCase needs expecttest): installed for the run
  echo 'test-depends = ["expecttest", "numpy"]' >"$work/fresh/publisher.toml"
  printf '%s\n' "from torch.testing._internal.common_utils import TestCase" "" "" "class TestImports(TestCase):" \
    "    def test_torch_testcase(self):" "        self.assertEqual(1, 1)" >"$work/fresh/tests/test_declared.py"
  publisher build "$work/fresh" --local --no-hub-cache 2>&1 | tail -3
  publisher test "$work/fresh" 2>&1 | tail -3
  report "$work/fresh" | tee -a "$summary"
  publisher push gpu-org/fresh-kernel "$work/fresh" --partial >"$OUT/push.log" 2>&1
  echo "push exit: $?" | tee -a "$summary"
  grep -E "consumer|PP1|PP4|loaded|published" "$OUT/push.log" | head -8 | tee -a "$summary"
  keep_cpu fresh
}
fi
ORDER=${ORDER:-"relu activation tinygrad-rms quantization-gptq mra cv-utils yoso deformable-detr rotary rmsnorm"}
EXAMPLE=${EXAMPLE-kernel_projects/rmsnorm}
for src in $(for p in $ORDER; do echo "$BUNDLE/projects/$p"; done) $EXAMPLE; do
  name=$(basename "$src")
  [ "$src" = "$EXAMPLE" ] && name="example-$name"  # the example kernel may share a name with a real project
  cp -r "$src" "$work/$name" && rm -rf "$work/$name/build"
  start=$(date +%s)
  timeout "${BUILD_LIMIT:-300}" publisher build "$work/$name" --local --no-hub-cache >"$OUT/build-$name.log" 2>&1
  rc_build=$?
  publisher test "$work/$name" >"$work/test-$name.log" 2>&1
  rc_test=$?
  echo "== $name: build exit $rc_build, test exit $rc_test, $(( $(date +%s) - start )) s" | tee -a "$summary"
  report "$work/$name" | tee -a "$summary"
  python3 - "$work/$name" <<'PY' | tee -a "$summary"  # the smoke test's calls, for projects without tests
import json, sys
from pathlib import Path
try:
    tests = json.loads((Path(sys.argv[1]) / "build/.publisher/test-report.json").read_text())
except (OSError, ValueError):
    tests = {}
for name, entry in sorted(tests.get("variants", tests).items()):
    for call in (entry.get("smoke") or []) if isinstance(entry, dict) else []:
        print(f"    smoke {name}: {call.get('target')}: {call.get('outcome')}: {(call.get('detail') or '')[:230]}")
PY
  keep_cpu "$name"
  cat "$work"/test-*.log > "$OUT/tests.log"
done
echo DONE | tee -a "$summary"
