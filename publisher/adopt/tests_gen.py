"""tests/ for an adopted project that had none: the kernel is loaded as users
load it (kernels.get_kernel), every op must be registered with the schema the
port derived, and every op is called, through the module users call it from,
on the inputs the project's own code passes it (publisher/adopt/inputs.py),
else on guesses from its C++ signature; where the project has a Python
reference of an op, the outputs are compared with it. The inputs are written
in one dict, each with where it came from, for the author to adjust.

What such a test may conclude is the verdict's rule: an op that raises on the
inputs it was given is skipped as "needs inputs" (the inputs are ours, a
reconstruction, even when derived from the project's calls; the op's refusal
says they do not fit, not that it computes wrongly), with the line to edit
(or "not registered" where torch's dispatcher has no kernel of the op for
the device of its inputs: the registration's gap, named as such);
only a crash, a broken device, a hang or a result unlike the project's
reference fails it. Each passing call records what it checked (ran, or
matched a reference) so that a verdict resting on these tests says so."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from publisher.adopt import inputs
from publisher.adopt.model import WRITTEN, Op
from publisher.consumer import LoadCall
from publisher.testing import protocol

# torch's device type for each backend's variant
DEVICE_TYPES = {"cpu": "cpu", "cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "metal": "mps"}


# the generated tests' one-line account of an exception (both files adopt writes use it)
FIRST_LINE = ["def _first_line(err):", "    return f\"{type(err).__name__}: {err}\".splitlines()[0][:300]"]


def load_line(repo_id: str, version: int) -> str:
    """How the generated tests load the kernel: as its users do (the card's call, allowlist included)."""
    call = LoadCall(repo_id, version)
    return f"{call.why()}\nkernel = {call.render(prefix='kernels.')}"


def _tensor(value: inputs.Concrete, mutable: bool) -> str:
    dims = ", ".join(str(d) for d in value.shape) if value.shape else "()"
    dtype = "" if value.dtype == "float32" else f", dtype=torch.{value.dtype}"
    device = f'"{value.device}"' if value.device else "DEVICE"
    if value.value is not None:  # the length of the one batch element
        return f"torch.tensor([{value.value}]{dtype}, device={device})"
    make = "torch.zeros" if mutable or value.integer else "torch.randn"
    return f"{make}({dims}{dtype}, device={device})"


def _spelled(arg: inputs.Argument) -> str:
    """An argument as the generated test writes it."""
    if arg.kind == "tensor":
        return _tensor(arg.tensor, arg.mutable)
    if arg.kind == "tensors":
        return f"[{_tensor(arg.tensor, False)}]"
    if arg.kind == "device":
        return "DEVICE"
    if arg.kind == "dtype":
        return f"torch.{arg.value}"
    return repr(arg.value)


def _inputs(op: Op, derived: inputs.Derived | None) -> str:
    values = [f"{a.name}={_spelled(a)}" if a.kw_only else _spelled(a) for a in inputs.arguments(op, derived)]
    inside = ", ".join(values)
    return f"lambda: ({inside},)" if len(values) == 1 else f"lambda: ({inside})"


def _returns(op: Op) -> str:
    r = op.returns
    if r.kind == "tuple":
        return repr(tuple(i.schema for i in r.inner))
    return repr(r.schema)


def device_lines(devices: Sequence[str]) -> list[str]:
    """DEVICE: the one device of a project built for one backend; for several (cpu and cuda), the device of the
    variant under test, named by the backend in its metadata.json (a CUDA torch loads the cpu variant too)."""
    if len(devices) == 1:
        return [f'DEVICE = "{devices[0]}"']
    return [
        "# the device of the variant under test: the project builds one variant per backend",
        f"DEVICE_TYPES = {json.dumps(DEVICE_TYPES)}",
        "DEVICE = DEVICE_TYPES[json.loads((pathlib.Path(kernel.__file__).parent / \"metadata.json\").read_text())"
        "[\"backend\"][\"type\"]]",
    ]


def test_file(*, repo_id: str, version: int, devices: Sequence[str], paths: dict[str, str], module_label: str,
              ops: Sequence[Op], references: dict[str, str], derived: dict[str, inputs.Derived] | None = None,
              replayed: Collection[str] = ()) -> str:
    """`devices`: torch's device type of each backend the project builds; `paths`: op -> the attribute path from
    the loaded kernel to where users call it (`""`, `"_C"`, `"_ops.ops"`); `derived`: op -> the arguments the
    project's own code passes it (inputs.derive); `replayed`: ops the replay tests call as the original was called
    (replay_tests.py), given no INPUTS here."""
    derived = derived or {}
    called = [op for op in ops if op.name not in replayed]
    lines = [
        f'"""{WRITTEN}: the ops of the former extension module `{module_label}`, loaded the way',
        "users load the kernel. INPUTS are what the project's own code passes each op where adopt found a call,",
        "and what its C++ checks (the line above each says where), else guesses from its C++ signature.",
        "An op that refuses its inputs is skipped as \"needs inputs\" with the line to edit: give it the shapes",
        "and dtypes it expects; one with no kernel for its inputs' device is skipped as \"not registered\".",
        "Only a crash, a broken device, a hang or a result unlike REFERENCES fails.",
        'REFERENCES compare an op with the project\'s Python implementation where adopt found one."""',
        "",
        "import importlib",
        *(["import json"] if len(devices) > 1 else []),
        "import os",
        *(["import pathlib"] if len(devices) > 1 else []),
        "import re",
        "",
        "import kernels",
        "import pytest",
        "import torch",
        "",
        f"NEEDS_INPUTS = {json.dumps(protocol.NEEDS_INPUTS)}  # publisher test: an op skipped so leaves the kernel untested",
        f"NOT_REGISTERED = {json.dumps(protocol.NOT_REGISTERED)}  # publisher test: likewise, an op without a kernel "
        "for the device",
        f"NO_KERNEL_FOR_BACKEND = re.compile({json.dumps(protocol.NO_KERNEL_FOR_BACKEND)})",
        f"CHECKED = {json.dumps(protocol.CHECKED)}  # publisher test: what a passing test checked (the verdict says it)",
        f"FATAL_DEVICE_ERROR = re.compile({json.dumps(protocol.FATAL_DEVICE_ERROR)}, re.I)",
        "",
        load_line(repo_id, version),
        *device_lines(devices),
        "",
        "# op -> where users call it",
        "FUNCTIONS = {",
        *(f'    "{op.name}": kernel' + "".join(f".{p}" for p in paths.get(op.name, "").split(".") if p) + ","
          for op in ops),
        "}",
        "",
        "# op -> its schema as adopt derived it from the C++ signature (torch-ext/ registers these)",
        "SCHEMAS = {",
    ]
    for op in ops:
        lines.append(f'    "{op.name}": {op.schema()!r},')
    lines += ["}", "", "RETURNS = {"]
    for op in ops:
        lines.append(f'    "{op.name}": {_returns(op)},')
    lines += ["}", "", "# op -> its arguments: edit these to give an op the inputs it expects"
              + (" (the ops the recorded calls replay are left out)" if replayed else ""), "INPUTS = {"]
    for op in called:
        found = derived.get(op.name)
        lines.append(f"    # from {found.site}" if found else
                     f"    # guessed from the C++ signature: nothing in the project calls {op.name}")
        lines.append(f'    "{op.name}": {_inputs(op, found)},')
    lines += ["}", "", "# op -> the project's call its INPUTS come from (empty: guessed)", "INPUTS_FROM = {"]
    for op in called:
        found = derived.get(op.name)
        lines.append(f'    "{op.name}": {json.dumps(found.site if found else "")},')
    lines += ["}", "", "REFERENCES = {"]
    for op, ref in sorted((o, r) for o, r in references.items() if o not in replayed):
        lines.append(f'    "{op}": {ref},')
    lines += ["}", ""]
    lines += [
        "",
        "def _ops():",
        '    return importlib.import_module(kernel.__name__ + "._ops").ops',
        "",
        "",
        "@pytest.mark.kernels_ci",
        "@pytest.mark.parametrize(\"name\", sorted(SCHEMAS))",
        "def test_op_is_registered_with_its_schema(name, record_property):",
        "    ops = _ops()",
        "    assert getattr(ops, name).default._schema == torch._C.parse_schema(f\"{ops.name}::{SCHEMAS[name]}\")",
        f"    record_property(CHECKED, {json.dumps(protocol.CHECKED_REGISTRATION)})",
        "",
        "",
        "def _check(result, returns):",
        "    if returns == \"()\":",
        "        assert result is None",
        "    elif isinstance(returns, tuple):",
        "        assert isinstance(result, tuple) and len(result) == len(returns)",
        "        for item, kind in zip(result, returns):",
        "            _check(item, kind)",
        "    elif returns.startswith(\"Tensor\"):",
        "        if returns.endswith(\"[]\"):",
        "            assert isinstance(result, list) and all(isinstance(t, torch.Tensor) for t in result)",
        "        else:",
        "            assert isinstance(result, torch.Tensor)",
        "",
        "",
        *FIRST_LINE,
        "",
        "",
        "def _broken_device(err):",
        "    \"\"\"Why the device can run nothing more after `err`, or None: then the call broke it, whatever its inputs.\"\"\"",
        "    if FATAL_DEVICE_ERROR.search(_first_line(err)):",
        "        return _first_line(err)",
        "    if torch.device(DEVICE).type != \"cuda\" or not torch.cuda.is_available():",
        "        return None  # no CUDA here: nothing to break",
        "    try:",
        "        torch.cuda.synchronize()",
        "        (torch.ones(1, device=DEVICE) + 1).item()",
        "    except Exception as broken:  # noqa: BLE001 - any error here means the context is gone",
        "        return _first_line(broken)",
        "    return None",
        "",
        "",
        "def _needs_inputs(name, who, err):",
        "    \"\"\"An op (or its reference) raised on the inputs it was given: they do not fit it, which says nothing of",
        "    what it computes. Skipped with the line to edit, unless the call broke the device. An op with no kernel",
        "    for the inputs' device was never called: that is said, not that it needs inputs.\"\"\"",
        "    broken = _broken_device(err)",
        "    if broken:",
        "        pytest.fail(f\"{name} broke the {DEVICE} device: {broken}\", pytrace=False)",
        "    given = f\"the inputs derived from {INPUTS_FROM[name]}\" if INPUTS_FROM.get(name) else \"guessed inputs\"",
        "    line = INPUTS[name].__code__.co_firstlineno",
        "    missing = NO_KERNEL_FOR_BACKEND.search(str(err))",
        "    if missing:",
        "        pytest.skip(f\"{NOT_REGISTERED}: {who} has no kernel for the {missing.group(1)} backend, the device of \"",
        "                    f\"{given} ({_first_line(err)}); the kernel's registration leaves it out there: register \"",
        "                    f\"{name} for {missing.group(1)}, or give INPUTS[{name!r}] tensors of a device it is \"",
        "                    f\"registered for: tests/{os.path.basename(__file__)}:{line}\")",
        "    pytest.skip(f\"{NEEDS_INPUTS}: {who} refused {given} ({_first_line(err)}); give INPUTS[{name!r}] the \"",
        "                f\"shapes and dtypes it expects: tests/{os.path.basename(__file__)}:{line}\")",
        "",
        "",
    ]
    if not called:
        return "\n".join(lines)
    lines += [
        "@pytest.mark.kernels_ci",
        "@pytest.mark.parametrize(\"name\", sorted(INPUTS))",
        "def test_op_runs_on_inputs_of_its_declared_types(name, record_property):",
        "    torch.manual_seed(0)",
        "    try:",
        "        args = INPUTS[name]()",
        "        result = getattr(FUNCTIONS[name], name)(*args)",
        "        if torch.device(DEVICE).type == \"cuda\":",
        "            torch.cuda.synchronize()",
        "    except Exception as err:  # noqa: BLE001 - whatever the op raises is its answer to these inputs",
        "        _needs_inputs(name, name, err)",
        "    _check(result, RETURNS[name])",
        f"    checked = {json.dumps(protocol.CHECKED_RAN)}",
        "    if name in REFERENCES:",
        "        torch.manual_seed(0)",
        "        try:",
        "            expected = REFERENCES[name](*INPUTS[name]())",
        "        except Exception as err:  # noqa: BLE001 - the reference does not take these inputs",
        "            _needs_inputs(name, f\"the reference of {name}\", err)",
        "        torch.testing.assert_close(result, expected)",
        f"        checked = {json.dumps(protocol.CHECKED_REFERENCE)}",
        "    record_property(CHECKED, checked)",
        "",
    ]
    return "\n".join(lines)
