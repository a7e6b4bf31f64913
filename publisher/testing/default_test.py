"""The smoke test used for a project without tests/ (and, load-only, for a
variant whose hardware this machine lacks).

It fails a variant only when the variant is certainly broken: the package
does not import through `kernels`, or the compiled extension registers no op
under its own namespace. What a call on inputs publisher made does (a shape,
dtype or device check raising: "not exercised"; the process or the GPU
context killed: no verdict, the call named) is never "failed": only the
project's own tests can say that an op computes the wrong thing, and a
kernel that trusts its inputs may crash on ones it was never meant to get. An op is called first on the arguments the package's own Python code
makes for it (its layers, wrappers and autograd Functions, completed by the
op's C++ checks), then on guesses from its schema. Every call is written to $PUBLISHER_TEST_SMOKE_OUT before it is made
and its outcome after, so a call that kills the process is named with its
inputs, and the report lists what was exercised and how.

Standalone (stdlib + pytest + torch + kernels). Environment:
PUBLISHER_TEST_KERNEL_DIR   folder holding <variant> (only the variant under test)
PUBLISHER_TEST_VARIANT_DIR  that variant folder (for metadata.json)
PUBLISHER_TEST_BACKEND      the variant's backend (cpu, cuda, ...)
PUBLISHER_TEST_LOAD_ONLY    "1": import and check op registration, call nothing
PUBLISHER_TEST_SMOKE_OUT    file the calls and their outcomes are appended to (JSON lines)
PUBLISHER_TEST_SMOKE_SKIP   targets not to call again (JSON list; a call that did not return)
PUBLISHER_TEST_SMOKE_CALL_TIMEOUT  seconds one call may take before it counts as not returning
PUBLISHER_TEST_SMOKE_INPUTS file: op -> the arguments the kernel package's own code gives it (JSON, written
                            by publisher/testing/callers.py), tried before any guess
"""

from __future__ import annotations

import inspect
import json
import os
import re
import threading
import types
import typing
from pathlib import Path

import pytest
import torch

_DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "metal": "mps"}
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_SHAPE = (8, 256)  # every tensor of a call has this shape: no tensor is smaller than another
_FLOAT = 1e-5  # a float argument without a default (an epsilon, a scale)
# The process exits with this code after a call that did not return (written to SMOKE_OUT first)
_HUNG_EXIT = 86
# Errors after which the device cannot run anything: the call broke it, whatever its inputs
_FATAL_DEVICE_ERROR = re.compile(
    r"illegal memory access|misaligned address|illegal instruction|unspecified launch failure|"
    r"an illegal|hardware stack error|Xid", re.I)
_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))  # Optional[T] and T | None
_OPS_CALL = re.compile(r"(?<![\w.])ops\.([A-Za-z_]\w*)\s*\(")


def _record(**entry) -> None:
    out = os.environ.get("PUBLISHER_TEST_SMOKE_OUT")
    if not out:
        return
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
        fh.flush()


def _skipped_targets() -> set[str]:
    try:
        return set(json.loads(os.environ.get("PUBLISHER_TEST_SMOKE_SKIP") or "[]"))
    except ValueError:
        return set()


def _op_names() -> set[str]:
    return {name.split(".")[0] for name in torch._C._dispatch_get_all_op_names()}


def _device() -> torch.device:
    return torch.device(_DEVICES.get(os.environ.get("PUBLISHER_TEST_BACKEND", "cpu"), "cpu"))


@pytest.fixture(scope="module")
def metadata() -> dict:
    return json.loads((Path(os.environ["PUBLISHER_TEST_VARIANT_DIR"]) / "metadata.json").read_text())


@pytest.fixture(scope="module")
def loaded(metadata):
    """(module, ops loading it added under its own namespace). Ops in other
    namespaces are not the kernel's to answer for: importing parts of torch
    (torch._inductor, ...) registers torch's own ops lazily."""
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
    variant_dir = Path(os.environ["PUBLISHER_TEST_VARIANT_DIR"])
    compiled = any(p.suffix == ".so" or ".so" in p.suffixes for p in variant_dir.iterdir())
    if compiled:
        assert added, (
            f"the compiled extension registered no op under torch.ops.{namespace} "
            "(register with TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ...), not a fixed namespace)"
        )
    registered = {name.split("::", 1)[1] for name in added}
    for name in sorted(_called_ops(variant_dir) - registered):
        # A call in a branch this variant never takes (another backend's op) is no proof of breakage.
        _record(event="warning", message=f"the package calls ops.{name}, which this variant does not register "
                                         f"(torch.ops.{namespace}.{name} does not exist)")


def _called_ops(variant_dir: Path) -> set[str]:
    """Names the package's Python files call as `ops.<name>(...)` after importing `ops` from _ops."""
    called: set[str] = set()
    for path in variant_dir.rglob("*.py"):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if re.search(r"from\s+\.+_ops\s+import\s+[^\n]*\bops\b", text):
            called |= set(_OPS_CALL.findall(text))
    return called


# -- calls on guessed inputs ------------------------------------------------------

class _Unmakeable(Exception):
    """An argument publisher does not guess (its kind or value cannot be known)."""


def _package_inputs() -> dict:
    path = os.environ.get("PUBLISHER_TEST_SMOKE_INPUTS")
    try:
        found = json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _package_value(entry: dict, device: torch.device, dtype: torch.dtype):
    kind = entry.get("kind")
    if kind in ("tensor", "tensors"):
        on = torch.device(entry["device"]) if entry.get("device") else device
        free = entry.get("free_dtype") and kind == "tensor"
        of = dtype if free else getattr(torch, entry.get("dtype") or "float32")
        if entry.get("fill") is not None:  # the length of the one batch element
            value = torch.tensor([entry["fill"]], dtype=of, device=on)
        elif entry.get("zeros"):
            value = torch.zeros(*entry["shape"], dtype=of, device=on)
        else:
            value = torch.randn(*entry["shape"], dtype=of, device=on)
        return [value] if kind == "tensors" else value
    if kind == "device":
        return device
    if kind == "dtype":
        return getattr(torch, entry.get("value") or "float32")
    return entry.get("value")


def _package_arguments(spec: dict, device: torch.device, dtype: torch.dtype) -> tuple[list, dict]:
    """The arguments the package's own code gives an op (see PUBLISHER_TEST_SMOKE_INPUTS)."""
    args: list = []
    kwargs: dict = {}
    for entry in spec.get("arguments") or ():
        value = _package_value(entry, device, dtype)
        if entry.get("kw_only"):
            kwargs[entry["name"]] = value
        else:
            args.append(value)
    return args, kwargs


def _schema_arguments(schema, device: torch.device, dtype: torch.dtype) -> tuple[list, dict]:
    """Positional and keyword arguments for an op from its schema; defaults are left to the op."""
    args: list = []
    kwargs: dict = {}
    for arg in schema.arguments:
        if arg.has_default_value():
            continue
        value = _schema_value(arg, device, dtype)
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    return args, kwargs


def _schema_value(arg, device: torch.device, dtype: torch.dtype):
    kind = arg.type.kind()
    if kind == "TensorType":
        return torch.randn(*_SHAPE, dtype=dtype, device=device)
    if kind == "OptionalType":
        return None
    if kind == "FloatType":
        return _FLOAT
    if kind == "NumberType":
        return 1.0
    if kind == "BoolType":
        return False
    if kind == "DeviceObjType":
        return device
    raise _Unmakeable(f"argument `{arg.name}: {arg.type}` (a size, index, list or name publisher does not guess)")


def _is_tensor_annotation(annotation) -> bool | None:
    """True: a tensor; False: optional (None admitted); None: anything else."""
    if annotation in (torch.Tensor, "torch.Tensor", "Tensor"):
        return True
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        if text in ("Optional[torch.Tensor]", "torch.Tensor|None", "Optional[Tensor]", "Tensor|None"):
            return False
        return None
    if typing.get_origin(annotation) in _UNIONS and set(typing.get_args(annotation)) == {torch.Tensor, type(None)}:
        return False
    return None


def _function_arguments(fn, device: torch.device, dtype: torch.dtype) -> tuple[list, dict]:
    """Arguments for a public Python function, only as its signature and annotations admit."""
    try:
        signature = inspect.signature(fn, eval_str=True)
    except Exception:  # noqa: BLE001 - an annotation that does not evaluate: read them as written
        signature = inspect.signature(fn)
    args: list = []
    kwargs: dict = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.default is not param.empty:
            continue
        annotation = param.annotation
        tensor = _is_tensor_annotation(annotation)
        if tensor is True:
            value = torch.randn(*_SHAPE, dtype=dtype, device=device)
        elif tensor is False or annotation is None or annotation is type(None) or annotation == "None":
            value = None
        elif annotation is float or annotation == "float":
            value = _FLOAT
        elif annotation is bool or annotation == "bool":
            value = False
        elif annotation is param.empty:
            raise _Unmakeable(f"parameter `{param.name}` has no annotation (publisher does not guess its kind)")
        else:
            shown = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
            raise _Unmakeable(f"parameter `{param.name}: {shown}` (not a tensor or a float)")
        if param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return args, kwargs


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"Tensor[{', '.join(map(str, value.shape))}] {str(value.dtype).removeprefix('torch.')} {value.device}"
    return repr(value)


def _inputs(args: list, kwargs: dict) -> str:
    return ", ".join([_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()])


def _device_error(device: torch.device) -> str | None:
    """Why the device can no longer run anything after a call, or None."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
        (torch.ones(1, device=device) + 1).item()
    except Exception as err:  # noqa: BLE001 - any error here means the context is gone
        return f"{type(err).__name__}: {err}".splitlines()[0]
    return None


class _Watchdog:
    """A call that does not return in time is recorded and the process ends
    (exit 86): native code that spins cannot be interrupted. The runner starts
    the smoke test again without that call."""

    def __init__(self, target: str, inputs: str, *also: dict):
        self.seconds = float(os.environ.get("PUBLISHER_TEST_SMOKE_CALL_TIMEOUT") or 60)
        self.records = [*also, dict(
            event="outcome", target=target, inputs=inputs, outcome="not-exercised",
            detail=f"did not return within {self.seconds:g} s (a wait on guessed inputs is no proof of a fault)")]
        self.timer = threading.Timer(self.seconds, self._expired)
        self.timer.daemon = True

    def _expired(self) -> None:
        for record in self.records:
            _record(**record)
        os._exit(_HUNG_EXIT)

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()


def _exercise(target: str, call, attempts: list, device: torch.device) -> list | None:
    """Call `call` on the arguments of each attempt ((where they come from, build(dtype) -> (args, kwargs),
    the dtypes to try), the package's own first), until one returns. Returns the arguments that worked (None when
    none did). Fails the test only when the device is broken by the call."""
    errors: list[str] = []
    for origin, build, dtypes in attempts:
        tried: list[str] = []
        for dtype in dtypes:
            try:
                args, kwargs = build(dtype)
            except _Unmakeable as why:
                errors.append(f"cannot be called: {why}")
                break
            inputs = _inputs(args, kwargs)
            _record(event="call", target=target, inputs=inputs)
            try:
                with _Watchdog(target, inputs):
                    call(*args, **kwargs)
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
            except Exception as err:  # noqa: BLE001 - inputs not the op's own: any error it raises is its answer
                message = f"{type(err).__name__}: {err}".splitlines()[0][:300]
                broken = _FATAL_DEVICE_ERROR.search(message) or _device_error(device)
                if broken:
                    _record(event="outcome", target=target, inputs=inputs, outcome="fatal", detail=message)
                    pytest.fail(f"{target}({inputs}) broke the {device.type} device: {message}", pytrace=False)
                tried.append(f"{str(dtype).removeprefix('torch.')}: {message}")
                continue
            _record(event="outcome", target=target, inputs=inputs, outcome="exercised",
                    detail=f"on inputs {origin}")
            return [args, kwargs]
        if tried:
            errors.append(f"raised on inputs {origin}: " + "; ".join(tried))
    _record(event="outcome", target=target, outcome="not-exercised", detail=" | ".join(errors))
    return None


def _public_functions(module) -> list[tuple[str, object]]:
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    found = []
    for name in names:
        fn = getattr(module, name, None)
        origin = getattr(fn, "__module__", None) or ""
        # the kernel's own functions (not the build's generated _ops helpers, nor what it imports)
        if inspect.isfunction(fn) and origin.startswith(module.__name__) and not origin.endswith("._ops"):
            found.append((name, fn))
    return found


def _opcheck(target: str, overload, args: list, kwargs: dict) -> None:
    """torch.library.opcheck on arguments that ran: a problem is a warning (not torch.compile-ready)."""
    opcheck = getattr(getattr(torch, "library", None), "opcheck", None)
    if opcheck is None:
        return
    # a check that does not return is a warning too; the smoke test goes on without it
    unknown = dict(event="warning", message=f"{target}: opcheck did not finish; torch.compile-readiness unknown")
    try:
        with _Watchdog(f"opcheck {target}", "", unknown):
            results = opcheck(overload, tuple(args), kwargs, raise_exception=False)
    except Exception as err:  # noqa: BLE001 - opcheck itself failing is not the kernel's verdict
        _record(event="warning", message=f"{target}: opcheck could not run ({type(err).__name__}: {err})"[:400])
        return
    problems: dict[str, list[str]] = {}
    for name, result in (results or {}).items():
        if result != "SUCCESS":
            problems.setdefault(_opcheck_problem(result), []).append(name)
    for problem, names in problems.items():
        _record(event="warning", message=f"{target}: not torch.compile-ready: {problem} (opcheck {', '.join(names)})")


def _opcheck_problem(result) -> str:
    if type(result).__name__ == "UnsupportedOperatorException":
        return ("no fake (meta) implementation, so torch.compile cannot trace it "
                "(torch.library.register_fake, or a Meta kernel)")
    text = str(result).strip().splitlines()
    return f"{type(result).__name__}: {text[0][:300] if text else 'failed'}"


def test_registered_ops_run(loaded, metadata):
    """Each op the variant registers, called as its schema says, on guessed inputs."""
    if os.environ.get("PUBLISHER_TEST_LOAD_ONLY") == "1":
        pytest.skip("load-only: this machine lacks the variant's hardware")
    _, added = loaded
    device, skip, known = _device(), _skipped_targets(), _package_inputs()
    namespace = getattr(torch.ops, metadata["id"])
    for qualified in sorted(added):
        name = qualified.split("::", 1)[1]
        packet = getattr(namespace, name)
        for overload_name in packet.overloads():
            overload = getattr(packet, overload_name)
            target = f"op {name}" + ("" if overload_name == "default" else f".{overload_name}")
            if target in skip:
                continue
            attempts = [("guessed from its schema", lambda dtype, s=overload._schema: _schema_arguments(s, device, dtype),
                         _DTYPES)]
            spec = known.get(name) if overload_name == "default" else None
            if isinstance(spec, dict):
                # a dtype to try for each float tensor the package leaves open; else its own, once
                free = any(e.get("free_dtype") for e in spec.get("arguments") or ())
                attempts.insert(0, (f"as the package makes them ({spec.get('site')})",
                                    lambda dtype, spec=spec: _package_arguments(spec, device, dtype),
                                    _DTYPES if free else _DTYPES[:1]))
            worked = _exercise(target, overload, attempts, device)
            if worked is not None and f"opcheck {target}" not in skip:
                args, kwargs = worked
                _opcheck(target, overload, args, kwargs)


def test_public_functions_run(loaded):
    """Each public function whose parameters are all tensors or floats, called with them."""
    if os.environ.get("PUBLISHER_TEST_LOAD_ONLY") == "1":
        pytest.skip("load-only: this machine lacks the variant's hardware")
    module, _ = loaded
    device, skip = _device(), _skipped_targets()
    for name, fn in _public_functions(module):
        target = f"function {name}"
        if target not in skip:
            _exercise(target, fn, [("guessed from its signature",
                                    lambda dtype, fn=fn: _function_arguments(fn, device, dtype), _DTYPES)], device)
