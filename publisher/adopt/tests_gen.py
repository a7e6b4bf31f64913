"""tests/ for an adopted project that had none: the kernel is loaded as users
load it (kernels.get_kernel), every op must be registered with the schema the
port derived, and every op is called, through the module users call it from,
on inputs of its declared types; where the project has a Python reference of
an op, the outputs are compared with it. Input shapes are guesses from the C++
signature, written in one dict for the author to adjust."""

from __future__ import annotations

from collections.abc import Sequence

from publisher.adopt.model import WRITTEN, Op, OpArg
from publisher.consumer import LoadCall

_GUESS = {"float": "0.5", "int": "4", "bool": "False", "str": '"default"', "Scalar": "1.0",
          "ScalarType": "torch.float32", "Device": "DEVICE", "int[]": "[1]", "float[]": "[0.5]", "bool[]": "[False]"}


def _argument(arg: OpArg) -> str | None:
    """A guessed value of the declared type; None where the schema default is used."""
    if arg.default is not None:
        return None
    c = arg.ctype
    if c.kind == "tensor":
        return "torch.zeros(8, 64, device=DEVICE)" if c.mutable else "torch.randn(8, 64, device=DEVICE)"
    if c.kind == "optional":
        return "None"
    if c.kind == "list" and c.inner[0].kind == "tensor":
        return "[torch.randn(8, 64, device=DEVICE)]"
    return _GUESS.get(c.schema, "None")


def _inputs(op: Op) -> str:
    values = []
    for arg in op.args:
        value = _argument(arg)
        if value is None:
            break  # the rest take their defaults (they all have one: a schema's defaults trail)
        values.append(f"{arg.name}={value}" if arg.kw_only else value)
    inside = ", ".join(values)
    return f"lambda: ({inside},)" if len(values) == 1 else f"lambda: ({inside})"


def _returns(op: Op) -> str:
    r = op.returns
    if r.kind == "tuple":
        return repr(tuple(i.schema for i in r.inner))
    return repr(r.schema)


def test_file(*, repo_id: str, version: int, device: str, paths: dict[str, str], module_label: str,
              ops: Sequence[Op], references: dict[str, str]) -> str:
    """`paths`: op -> the attribute path from the loaded kernel to where users call it (`""`, `"_C"`, `"_ops.ops"`)."""
    lines = [
        f'"""{WRITTEN}: the ops of the former extension module `{module_label}`, loaded the way',
        "users load the kernel. INPUTS are guesses from each op's C++ signature (every tensor 8x64",
        "float32): give them the shapes and dtypes your kernels expect -- a test fails until they fit.",
        'REFERENCES compare an op with the project\'s Python implementation where adopt found one."""',
        "",
        "import importlib",
        "",
        "import kernels",
        "import pytest",
        "import torch",
        "",
        f'DEVICE = "{device}"',
        "",
        LoadCall(repo_id, version).why(),
        f"kernel = {LoadCall(repo_id, version).render(prefix='kernels.')}",
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
    lines += ["}", "", "INPUTS = {"]
    for op in ops:
        lines.append(f'    "{op.name}": {_inputs(op)},')
    lines += ["}", "", "REFERENCES = {"]
    for op, ref in sorted(references.items()):
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
        "def test_op_is_registered_with_its_schema(name):",
        "    ops = _ops()",
        "    assert getattr(ops, name).default._schema == torch._C.parse_schema(f\"{ops.name}::{SCHEMAS[name]}\")",
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
        "            assert isinstance(result, torch.Tensor) and result.device.type == torch.device(DEVICE).type",
        "",
        "",
        "@pytest.mark.kernels_ci",
        "@pytest.mark.parametrize(\"name\", sorted(INPUTS))",
        "def test_op_runs_on_inputs_of_its_declared_types(name):",
        "    torch.manual_seed(0)",
        "    args = INPUTS[name]()",
        "    try:",
        "        result = getattr(FUNCTIONS[name], name)(*args)",
        "    except (RuntimeError, ValueError, IndexError) as err:",
        "        pytest.fail(f\"{name} refused the inputs in INPUTS[{name!r}] ({err}); give them the shapes the kernel \"",
        "                    \"expects\", pytrace=False)",
        "    _check(result, RETURNS[name])",
        "    if name in REFERENCES:",
        "        torch.manual_seed(0)",
        "        expected = REFERENCES[name](*INPUTS[name]())",
        "        torch.testing.assert_close(result, expected)",
        "",
    ]
    return "\n".join(lines)
