#!/usr/bin/env bash
# Developer script, for the GPU machine: real extension projects, unmodified, in $BUNDLE/record/<name>, each
# taken through `publisher adopt --record` (the original built its author's way, here for this GPU only
# (TORCH_CUDA_ARCH_LIST), its tests, scripts and README run with every call into it recorded),
# `publisher build --local` (this torch's CUDA variant, for this GPU's capability only) and `publisher test`
# (the project's tests and the replay of the recorded calls). All projects at once; a table at the end:
# calls recorded, ops, where from, the verdict. Fill $BUNDLE/record/<name> with `git archive` of each project
# (BENCHMARKS.md names the projects and commits measured). $OUT/results.zip: <name>-{adopt,build,test}.json and the logs.
set -uo pipefail
BUNDLE=${BUNDLE:-.gpu-bundle}
OUT=${OUT:-/tmp/record-out}
BUDGET=${BUDGET:-540}
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-4}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$BUNDLE"/whl/*.whl "$BUNDLE"/test-whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
MATRIX=$PWD/matrices/gpu-runner-torch211-cu130.yaml
START=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
one() {
  local name=$1 w=/tmp/record-work/$1
  rm -rf "$w" && mkdir -p /tmp/record-work && cp -r "$BUNDLE/record/$name" "$w"
  timeout "$(left)" publisher adopt "$w" --record --force --json --record-timeout 150 > "$OUT/$name-adopt.json" 2> "$OUT/$name-adopt.err"
  python3 - "$w/build.toml" <<'PY'
import sys, tomlkit
path = sys.argv[1]
doc = tomlkit.parse(open(path).read())
for kernel in (doc.get("kernel") or {}).values():
    if kernel.get("backend") == "cuda":
        kernel["cuda-capabilities"] = ["9.0"]
open(path, "w").write(tomlkit.dumps(doc))
PY
  timeout "$(left)" publisher build "$w" --local --matrix "$MATRIX" --json > "$OUT/$name-build.json" 2> "$OUT/$name-build.err"
  timeout "$(left)" publisher test "$w" --json > "$OUT/$name-test.json" 2> "$OUT/$name-test.err"
  cp "$w/build/.publisher/logs/adopt-record.log" "$OUT/$name-record.log" 2>/dev/null
  cp -r "$w/tests" "$OUT/$name-tests" 2>/dev/null
  echo "done $name at $(( $(date +%s) - START )) s"
}
for name in $(ls "$BUNDLE/record"); do one "$name" & done
wait
python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"{'project':<30} {'recorded':<26} {'verdict':<8} {'tests':<24} what it rests on / why")
for adopt in sorted(out.glob("*-adopt.json")):
    name = adopt.name.removesuffix("-adopt.json")
    try:
        rec = json.loads(adopt.read_text()).get("recording") or {}
    except ValueError:
        rec = {"why_not": "adopt did not finish: " + (out / f"{name}-adopt.err").read_text()[-200:]}
    said = f"{rec.get('calls', 0)} calls of {len(rec.get('ops') or [])} ops" if rec.get("calls") else "none"
    try:
        variants = json.loads((out / f"{name}-test.json").read_text())["variants"]
    except (OSError, ValueError, KeyError):
        variants = {}
    for variant, v in variants.items() or [("-", {})]:
        checks = v.get("checks") or {}
        rests = (f"original {checks.get('original')} calls / {checks.get('original-ops')} ops from "
                 f"{', '.join(v.get('recorded_from') or [])}" if checks.get("original") else (v.get("reason") or "")[:200])
        print(f"{name:<30} {said:<26} {v.get('status', '-'):<8} {str(v.get('tests', '-')):<24} {rests}")
    print(f"    ran: {'; '.join(r['program'] + ': ' + r['outcome'][:90] for r in rec.get('ran') or [])}"
          + (f" | why not: {rec['why_not'][:200]}" if rec.get("why_not") else ""))
PY
(cd "$OUT" && python3 -m zipfile -c /tmp/results.zip ./* && rm -rf ./* && mv /tmp/results.zip .)
