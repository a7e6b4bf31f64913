"""Load a published kernel as a consumer does, in a process of its own (push
runs this file with a fresh Hugging Face cache and no token): the `kernels`
call with exactly the card's arguments, then its ops. It imports nothing of
publisher, and prints one JSON line:

  {"status": "loaded", "variant": ..., "ops": N, "compiled": bool}
  {"status": "no-variant", "reason": ...}      nothing for this machine (trust and listing were checked)
  {"status": "failed", "stage": "load"|"ops", "error": ...}
  {"status": "not-checked", "reason": ...}     torch or kernels cannot be imported here

It imports torch and kernels first, then waits for the request: the JSON file argv[1]
names, {"repo_id", "version", "trust_remote_code" (list or null), "variants", "token"
(null unless the repo is private)}, which it deletes once read; its folder gone: nothing
to load.
"""

import importlib
import json
import os
import sys
import time
from pathlib import Path


def main() -> dict | None:
    try:
        import kernels
        import torch
        from kernels.variants import parse_variant, resolve_variant, variants_trace_str
    except ImportError as err:
        return {"status": "not-checked", "reason": f"{err.name or err} cannot be imported here"}
    handed = Path(sys.argv[1])
    while not handed.exists():  # written (atomically) once the version is published
        if not handed.parent.is_dir():
            return None  # the push stopped before publishing: nothing to load
        time.sleep(0.02)
    request = json.loads(handed.read_text())
    handed.unlink()
    if request.get("token"):
        os.environ["HF_TOKEN"] = request["token"]

    parsed = []
    for name in request["variants"]:
        try:
            parsed.append(parse_variant(name))
        except ValueError:
            continue
    here, decisions = resolve_variant(parsed)
    kwargs = {"version": request["version"]}
    if request["trust_remote_code"] is not None:
        kwargs["trust_remote_code"] = request["trust_remote_code"]
    try:
        kernel = kernels.get_kernel(request["repo_id"], **kwargs)
    except Exception as err:  # noqa: BLE001 - whatever a consumer would see
        error = f"{type(err).__name__}: {err}"
        if here is None and "trust_remote_code" not in str(err):
            return {"status": "no-variant", "reason": variants_trace_str(decisions).strip() or error}
        return {"status": "failed", "stage": "load", "error": error}

    folder = Path(kernel.__file__).parent
    compiled = any(p.suffix in (".so", ".pyd") for p in folder.iterdir())
    ops_id = json.loads((folder / "metadata.json").read_text())["id"]
    if compiled and folder.name.startswith("torch"):
        try:
            importlib.import_module(f"{kernel.__name__}._ops")
        except Exception as err:  # noqa: BLE001
            return {"status": "failed", "stage": "ops", "error": f"{type(err).__name__}: {err}"}
    ops = sorted(s.name for s in torch._C._jit_get_all_schemas() if s.name.startswith(f"{ops_id}::"))
    if compiled and folder.name.startswith("torch") and not ops:
        return {"status": "failed", "stage": "ops",
                "error": f"variant {folder.name} imports, but its library registers no op under {ops_id}::"}
    return {"status": "loaded", "variant": folder.name, "ops": len(ops), "compiled": compiled}


if __name__ == "__main__":
    answer = main()
    if answer is not None:
        print(json.dumps(answer))
