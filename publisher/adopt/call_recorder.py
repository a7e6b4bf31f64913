"""Run one of the project's own programs (a script, its tests under pytest,
its README's code) with every call into its original extension recorded:
what went in, what came out, what the call wrote into its arguments, and how
much a second call on the same inputs differs (the original's own spread).
`publisher adopt --record` starts it as `python call_recorder.py SOURCE
script.py|-m pytest ...` in a scratch copy of the project; one JSON line per
call is appended to $PUBLISHER_RECORD_OUT. It runs in the project's Python,
where publisher may not be importable: it imports nothing of publisher.

The format (read by record.py, decoded by the replay tests adopt writes):
a value is JSON where JSON holds it, else {"t": kind, ...}: "tensor" (dtype,
shape, device type, the bytes in base64), "list"/"tuple" (items), "float"
(nan/inf spelled out), "dtype", "device"."""

from __future__ import annotations

import base64
import ctypes
import importlib.abc
import json
import math
import os
import runpy
import sys

OUT = "PUBLISHER_RECORD_OUT"  # the JSON-lines file calls are appended to
MODULES = "PUBLISHER_RECORD_MODULES"  # JSON list: the original extension's module names ("pkg._C", "lltm_cpp")
OVERLAY = "PUBLISHER_RECORD_OVERLAY"  # a folder of what the project's tests need and this interpreter lacks
MAX_CALLS = 24  # calls of one function written by one program (the later ones are counted only)
MAX_CALL_BYTES = 2 * 1024 * 1024  # tensor bytes of one call, in and out: a larger call is counted only


class Unrecordable(Exception):
    """A value the replay could not rebuild (an object of the project's, a dict, a numpy array)."""


def encode(value):
    import torch

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        raw = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""  # no numpy needed
        return {"t": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                "device": value.device.type, "data": base64.b64encode(raw).decode()}
    if isinstance(value, (list, tuple)):
        return {"t": type(value).__name__ if type(value) in (list, tuple) else "tuple",
                "items": [encode(v) for v in value]}
    if isinstance(value, torch.dtype):
        return {"t": "dtype", "v": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"t": "device", "v": value.type}
    raise Unrecordable(type(value).__name__)


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _clone(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value) if type(value) in (list, tuple) else tuple(_clone(v) for v in value)
    return value


def _same(a, b) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return bool(torch.equal(a, b))


def _spread(first, second) -> list:
    """For each tensor of the first call's outputs, how far the second call's is from it: 0.0 the same, a float
    the largest difference, None a difference no number says (integers, shapes)."""
    import torch

    spread = []
    xs, ys = _tensors(first), _tensors(second)
    for i, x in enumerate(xs):
        y = ys[i] if i < len(ys) else None
        if y is None or x.shape != y.shape or x.dtype != y.dtype:
            spread.append(None)
        elif _same(x, y):
            spread.append(0.0)
        elif x.is_floating_point():
            d = (x.detach().double() - y.detach().double()).abs()
            d = torch.where(torch.isnan(d), torch.zeros_like(d), d)
            spread.append(float(d.max()))
        else:
            spread.append(None)
    return spread


class _Recorder:
    def __init__(self, out: str, source: str):
        self.out = out
        self.source = source
        self.counts: dict[str, int] = {}
        self.busy = False  # a call inside a recorded call (the second call of a spread) is not recorded

    def write(self, entry: dict) -> None:
        with open(self.out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def wrap(self, function, name: str, module: str):
        recorder = self

        def recorded(*args, **kwargs):
            if recorder.busy:
                return function(*args, **kwargs)
            recorder.busy = True
            try:
                return recorder.call(function, name, module, args, kwargs)
            finally:
                recorder.busy = False

        recorded.__name__ = getattr(function, "__name__", name)
        recorded.__doc__ = getattr(function, "__doc__", None)
        recorded.__wrapped__ = function
        return recorded

    def call(self, function, name: str, module: str, args, kwargs):
        import torch

        seen = self.counts.get(name, 0)
        self.counts[name] = seen + 1
        tensors_in = _tensors(list(args) + list(kwargs.values()))
        size = sum(t.numel() * t.element_size() for t in tensors_in)
        if seen >= MAX_CALLS or size > MAX_CALL_BYTES:
            self.write({"op": name, "module": module, "from": self.source, "skipped": "many" if seen >= MAX_CALLS
                        else "large"})
            return function(*args, **kwargs)
        try:
            where = _where()
            test_file = where.split("::")[0] if "::" in where else ""  # under pytest: the test module it ran in
            entry = {"op": name, "module": module, "from": test_file or self.source, "where": where,
                     "args": encode(list(args)), "kwargs": {k: encode(v) for k, v in kwargs.items()}}
        except Exception as err:  # noqa: BLE001 - Unrecordable, or tensors without data (fake, meta): not kept
            self.write({"op": name, "module": module, "from": self.source, "skipped": f"an argument: {err}"[:200]})
            return function(*args, **kwargs)
        before_args, before_kwargs = _clone(list(args)), {k: _clone(v) for k, v in kwargs.items()}
        result = function(*args, **kwargs)
        try:
            synchronize = torch.cuda.synchronize if any(t.is_cuda for t in tensors_in) else (lambda: None)
            synchronize()
            entry["result"] = encode(result)
            mutated = {}
            for i, (old, new) in enumerate(zip(_tensors([*before_args, *before_kwargs.values()]), tensors_in,
                                                strict=True)):
                if not _same(old, new):
                    mutated[str(i)] = encode(new)
            entry["mutated"] = mutated
            again_args, again_kwargs = _clone(before_args), {k: _clone(v) for k, v in before_kwargs.items()}
            try:
                again = function(*again_args, **again_kwargs)
                synchronize()
                entry["spread"] = _spread(list(_tensors(result)) + [t for i, t in enumerate(tensors_in)
                                                                     if str(i) in mutated],
                                          list(_tensors(again)) + [t for i, t in enumerate(_tensors(
                                              [*again_args, *again_kwargs.values()])) if str(i) in mutated])
            except Exception as err:  # noqa: BLE001 - a second call that fails: its spread is unknown
                entry["spread_error"] = f"{type(err).__name__}: {err}"[:200]
        except Exception as err:  # noqa: BLE001 - as above, for what the call returned
            entry = {"op": name, "module": module, "from": self.source, "skipped": f"a result: {err}"[:200]}
        self.write(entry)
        return result


def _where() -> str:
    """The project's line that made the call (the innermost frame outside this file)."""
    frame = sys._getframe(3)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    if frame is None:
        return ""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    return test or f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"


def wrap_module(module, recorder: _Recorder) -> None:
    for name in list(vars(module)):
        value = vars(module)[name]
        if not name.startswith("_") and type(value).__name__ == "builtin_function_or_method":
            setattr(module, name, recorder.wrap(value, name, module.__name__))


def _recording_copy(obj, call):
    """A copy of an OpOverloadPacket or OpOverload whose calls `call` records: still one of torch's own (what
    torch.library.opcheck and torch.compile check for), everything but the call its original's."""
    cls = type(obj)
    new = object.__new__(type(cls.__name__, (cls,), {"__call__": lambda self, *a, **k: call(*a, **k)}))
    new.__dict__.update(obj.__dict__)
    return new


def _op_names() -> set[str]:
    torch = sys.modules.get("torch")
    return set(torch._C._dispatch_get_all_op_names()) if torch is not None else set()


def wrap_new_ops(before: set[str], recorder: _Recorder) -> None:
    """The ops loading the extension registered (TORCH_LIBRARY), wrapped where Python finds them."""
    import torch

    for qualified in sorted(_op_names() - before):
        namespace, _, name = qualified.partition("::")
        name = name.split(".")[0]
        if namespace in ("aten", "prim", "prims") or not name.isidentifier():
            continue
        space = getattr(torch.ops, namespace)
        packet = getattr(space, name, None)
        if packet is None or getattr(packet, "_publisher_recorded", False):
            continue
        label = f"torch.ops.{namespace}"
        recorded = _recording_copy(packet, recorder.wrap(packet, name, label))
        for overload in packet.overloads():  # torch.ops.<ns>.<op>.default(...): the way most code calls it
            setattr(recorded, overload, _recording_copy(getattr(packet, overload),
                                                        recorder.wrap(getattr(packet, overload), name, label)))
        recorded._publisher_recorded = True
        setattr(space, name, recorded)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the extension's functions as soon as it is imported, before anyone takes them from it."""

    def __init__(self, names: set[str], recorder: _Recorder):
        self.names = names
        self.recorder = recorder

    def find_spec(self, name, path, target=None):
        if name not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                _record_loading(spec.loader, self.recorder)
                return spec
        return None


def _record_loading(loader, recorder: _Recorder) -> None:
    """The loader of the extension made to wrap what loading it gives: its functions, and the ops its library
    registers (TORCH_LIBRARY) as it is loaded."""
    create, execute = loader.create_module, loader.exec_module
    before: set[str] = set()

    def create_module(spec):
        try:
            import torch  # noqa: F401 - a torch extension needs it loaded first anyway
        except ImportError:
            pass
        before.update(_op_names())  # loading the library registers its ops: those are new after
        return create(spec)

    def exec_module(module):
        execute(module)
        wrap_module(module, recorder)
        if before:
            wrap_new_ops(before, recorder)

    loader.create_module, loader.exec_module = create_module, exec_module


def _wrap_jit_loads(names: set[str], recorder: _Recorder) -> None:
    """load()/load_inline(): torch imports the module it built through one function; wrap what it returns."""
    import torch.utils.cpp_extension as cpp_extension

    importer = cpp_extension._import_module_from_library

    def imported(module_name, *args, **kwargs):
        module = importer(module_name, *args, **kwargs)
        if module_name in names and hasattr(module, "__dict__"):
            wrap_module(module, recorder)
        return module

    cpp_extension._import_module_from_library = imported


class _Outcomes:
    """A pytest plugin: each test's start and outcome with the original, one JSON line each (a test that starts
    and has no outcome crashed the process)."""

    def __init__(self, recorder: _Recorder):
        self.recorder = recorder

    def pytest_runtest_logstart(self, nodeid, location):
        self.recorder.write({"test": nodeid, "outcome": "started"})

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or report.outcome != "passed":
            self.recorder.write({"test": report.nodeid, "outcome": report.outcome, "when": report.when})


def main(argv: list[str]) -> int:
    source, program = argv[0], argv[1:]
    names = set(json.loads(os.environ.get(MODULES, "[]")))
    recorder = _Recorder(os.environ[OUT], source)
    sys.meta_path.insert(0, _Finder(names, recorder))
    leaves = {n.rsplit(".", 1)[-1] for n in names}
    try:
        _wrap_jit_loads(leaves, recorder)
    except (ImportError, AttributeError):
        pass  # no torch here, or a torch without that function: setup.py extensions are still recorded
    if os.environ.get(OVERLAY):
        import site

        site.addsitedir(os.environ[OVERLAY])  # behind the interpreter's own packages, as `publisher test` adds it
    os.environ.pop("PYTEST_CURRENT_TEST", None)  # set by a pytest that started this program, not by its own
    if program[:2] == ["-m", "pytest"]:
        sys.argv = ["pytest", *program[2:]]
        import pytest

        return int(pytest.main(program[2:], plugins=[_Outcomes(recorder)]))
    script = os.path.abspath(program[0])
    sys.argv = [script, *program[1:]]
    sys.path[0] = os.path.dirname(script)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
