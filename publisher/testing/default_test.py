"""The smoke test used for a project without tests/ (and, load-only, for a
variant whose hardware this machine lacks).

Standalone (stdlib + pytest + torch + kernels). Environment:
PUBLISHER_TEST_KERNEL_DIR  folder holding <variant> (only the variant under test)
PUBLISHER_TEST_VARIANT_DIR that variant folder (for metadata.json)
PUBLISHER_TEST_BACKEND     the variant's backend (cpu, cuda, ...)
PUBLISHER_TEST_LOAD_ONLY   "1": import and check op registration, call nothing
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest
import torch

_DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "metal": "mps"}
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _op_names() -> set[str]:
    return {name.split(".")[0] for name in torch._C._dispatch_get_all_op_names()}


@pytest.fixture(scope="module")
def metadata() -> dict:
    return json.loads((Path(os.environ["PUBLISHER_TEST_VARIANT_DIR"]) / "metadata.json").read_text())


@pytest.fixture(scope="module")
def loaded(metadata):
    """(module, ops loading it added under its own namespace, the ops id).
    Ops in other namespaces are not the kernel's to answer for: importing
    parts of torch (torch._inductor, ...) registers torch's own ops lazily."""
    import kernels

    backend = os.environ.get("PUBLISHER_TEST_BACKEND")
    module = kernels.get_local_kernel(
        Path(os.environ["PUBLISHER_TEST_KERNEL_DIR"]), backend="cpu" if backend == "cpu" else None
    )
    prefix = metadata["id"] + "::"
    return module, {name for name in _op_names() if name.startswith(prefix)}


def test_loads_through_kernels(loaded, metadata):
    module, _ = loaded
    assert module.__name__ == metadata["id"], (
        f"kernels imported the variant as {module.__name__}, expected the metadata id {metadata['id']}"
    )


def test_ops_registered_under_metadata_id(loaded, metadata):
    _, added = loaded
    namespace = metadata["id"]
    compiled = any(p.suffix == ".so" or ".so" in p.suffixes for p in Path(os.environ["PUBLISHER_TEST_VARIANT_DIR"]).iterdir())
    if compiled:
        assert added, (
            f"the compiled extension registered no op under torch.ops.{namespace} "
            "(register with TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ...), not a fixed namespace)"
        )
    for name in added:
        op = getattr(getattr(torch.ops, namespace), name.split("::", 1)[1])
        assert op is not None


def _tensor_only_functions(module) -> list[tuple[str, object]]:
    """Public functions of the kernel callable with one positional tensor."""
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    found = []
    for name in names:
        fn = getattr(module, name, None)
        if not inspect.isfunction(fn) or not (fn.__module__ or "").startswith(module.__name__):
            continue
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            continue
        required = [
            p for p in params
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if len(required) == 1 and required[0].kind is not inspect.Parameter.KEYWORD_ONLY:
            found.append((name, fn))
    return found


def test_public_functions_run(loaded):
    if os.environ.get("PUBLISHER_TEST_LOAD_ONLY") == "1":
        pytest.skip("load-only: this machine lacks the variant's hardware")
    module, _ = loaded
    functions = _tensor_only_functions(module)
    if not functions:
        pytest.skip("no public function can be called with a tensor alone")
    device = _DEVICES.get(os.environ.get("PUBLISHER_TEST_BACKEND", "cpu"), "cpu")
    failures = []
    for name, fn in functions:
        errors = []
        for dtype in _DTYPES:
            x = torch.randn(8, 256, dtype=dtype, device=device)
            try:
                fn(x)
                break
            except Exception as err:  # any dtype the kernel accepts is enough
                errors.append(f"{dtype}: {type(err).__name__}: {err}")
        else:
            failures.append(f"{name}(tensor) failed for every dtype:\n  " + "\n  ".join(errors))
    assert not failures, "\n".join(failures)
