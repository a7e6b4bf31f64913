#!/usr/bin/env bash
# Developer script, for the GPU machine: push as consumers meet it, where `kernels` checks a
# variant's backend.archs against a real device. `publisher hub-server` trusts no org, as the Hub
# trusts almost none. The example rmsnorm is built for the machine's torch ($MATRIX) twice:
#   covered    as written: its cuda-capabilities include this GPU's generation
#   uncovered  cuda-capabilities = ["8.0"] only: a binary this GPU cannot run (sm_80 SASS, no PTX)
# Both are pushed to an untrusted org. push then loads each exactly as its card says, in a fresh
# process with no token: `covered` must load with its ops registered (exit 0), `uncovered` must be
# published but refused by kernels' arch check (exit 4, PP401, kernels' own message) -- never a
# silent success. The card's python block is then run as a consumer against `covered`.
# Needs $WHL copied there (publisher's dependencies as wheels for the machine's Python). PREBUILT=DIR takes the two
# projects, built, from DIR/covered and DIR/uncovered instead of building them here: a machine whose C
# library is newer than manylinux_2_28 builds variants push refuses (PP103), as it should.
set -uo pipefail
MATRIX=${MATRIX:-matrices/gpu-runner-torch211-cu130.yaml}
WHL=${WHL:-.whl}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
VARIANT=${VARIANT:-*cu130*}
if [ -d "$WHL" ]; then  # the GPU machine: publisher and its dependencies from the carried wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHL"/*.whl
  export PYTHONPATH=/tmp/site
  python3 -m pip install -q --no-deps --no-build-isolation --no-index . 2>&1 | tail -2
fi
work=$(mktemp -d)
if [ -n "${PREBUILT:-}" ]; then
  cp -r "$PREBUILT/covered" "$PREBUILT/uncovered" "$work/"
else
  for name in covered uncovered; do
    cp -r kernel_projects/rmsnorm "$work/$name" && rm -rf "$work/$name/build"
  done
  python3 - "$work/uncovered/build.toml" <<'PY'
import sys
import tomlkit
path = sys.argv[1]
doc = tomlkit.parse(open(path).read())
doc["kernel"]["rmsnorm_cuda"]["cuda-capabilities"] = ["8.0"]
open(path, "w").write(tomlkit.dumps(doc))
PY
fi
. "$(dirname "${BASH_SOURCE[0]}")/hub_server.sh"
start_hub_server "$work" || exit 1
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
for name in covered uncovered; do
  echo "== $name"
  [ -n "${PREBUILT:-}" ] || publisher build "$work/$name" --local --matrix "$MATRIX" --variant "$VARIANT" 2>&1 | tail -3
  python3 -c "import json,sys; print('archs', json.load(open(sys.argv[1]))['backend'])" \
    "$(ls -d "$work/$name"/build/torch*${VARIANT//\*/}*)/metadata.json"
  untested=()
  if [ "$name" = covered ]; then
    publisher test "$work/$name" --matrix "$MATRIX" --variant "$VARIANT" 2>&1 | tail -4
  else
    untested=(--allow-untested)
  fi
  publisher push "gpu-org/rmsnorm-$name" "$work/$name" --matrix "$MATRIX" --variant "$VARIANT" --partial \
    "${untested[@]}" >"$OUT/push-$name.log" 2>&1
  echo "push exit: $?" | tee -a "$OUT/push-$name.log"
  grep -E "consumer|PP40|loaded|cannot load|arch|capabilit" "$OUT/push-$name.log" | head -12
done
# the card's python block, run as a consumer would: fresh process, fresh cache, no token
card="$work/card.md"
python3 - "$HF_ENDPOINT" "$card" <<'PY'
import sys
from huggingface_hub import hf_hub_download
path = hf_hub_download("gpu-org/rmsnorm-covered", "README.md", repo_type="kernel", endpoint=sys.argv[1])
open(sys.argv[2], "w").write(open(path).read())
PY
python3 - "$card" > "$work/card_block.py" <<'PY'
import re, sys
blocks = re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S)
print(blocks[0])
PY
echo "== the card's python block, as a consumer"; cat "$work/card_block.py"
(cd "$work" && env -u HF_TOKEN HF_HOME="$work/consumer-home" python3 card_block.py) 2>&1 | tail -5
echo "card block exit: ${PIPESTATUS[0]}"
cp "$card" "$OUT/card-covered.md"
