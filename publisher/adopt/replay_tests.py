"""The replay tests adopt writes from a recording (record.py): every call the
project's own code made into the original extension, kept in
tests/recorded/<name>.json, is made again on the kernel loaded the way users
load it, and must give what the original gave: integers, booleans and
indices exactly, floats within the original's own run-to-run spread and at
least torch.testing.assert_close's default tolerance for their dtype; the
arguments a call wrote into are compared too. A call the kernel raises on
where the original returned fails (the same inputs, on the same device);
one recorded on another device than the variant's, or whose op the kernel
does not register for that device, is skipped as such, never failed. What a
passing call checked goes to the verdict as a recorded property."""

from __future__ import annotations

import json
from collections.abc import Sequence

from publisher.adopt import tests_gen
from publisher.adopt.model import WRITTEN, Op
from publisher.testing import protocol

RECORDED_DIR = protocol.RECORDED_DIR
# torch.testing.assert_close's default (rtol, atol) per dtype: the least a float output may differ by
DEFAULT_TOLERANCE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                     "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def calls_for(ops: Sequence[Op], calls: Sequence[dict]) -> list[dict]:
    """The recorded calls of these ops whose keyword arguments the op's schema names (the replay passes them by
    name); the rest cannot be replayed as recorded."""
    names = {op.name: {a.name for a in op.args} for op in ops}
    return [c for c in calls if c["op"] in names and set(c.get("kwargs") or {}) <= names[c["op"]]]


def recorded_file(*, label: str, torch_device: str, calls: Sequence[dict],
                  original_failures: dict[str, str] | None = None) -> str:
    """`original_failures`: the project's tests (as tests/ holds them) that failed or crashed with the original:
    `publisher test` does not hold those against the kernel (testing/verdict.py)."""
    head = {"written_by": f"{WRITTEN} --record: calls into the original extension `{label}`, what went in and what "
                         "came out (tensors as base64 bytes); the replay test beside it compares the kernel with them",
            "original": label, "device": torch_device, protocol.ORIGINAL_FAILURES: dict(original_failures or {})}
    kept = [json.dumps({k: c[k] for k in ("op", "from", "where", "args", "kwargs", "result", "mutated", "spread") if k in c})
            for c in calls]
    return json.dumps(head, indent=1)[:-2] + ',\n "calls": [\n  ' + ",\n  ".join(kept) + "\n ]\n}\n"


def test_file(*, repo_id: str, version: int, devices: Sequence[str], paths: dict[str, str], label: str,
              recorded: str, sources: Sequence[str], ci_subset: bool, package: str | None = None) -> str:
    """`recorded`: the recorded calls' file name under tests/recorded/; `paths`: op -> the attribute path from
    the loaded kernel to where users call it; `ci_subset`: marked kernels_ci, as the tests beside it are (where
    some tests are marked, `publisher test` runs only those); `package`: the kernel imported as this package, as
    the project's own tests beside it import it (one process must not load the kernel twice, under two names)."""
    shown = ", ".join(sources[:4]) + (" ..." if len(sources) > 4 else "")
    lines = [
        f'"""{WRITTEN}: the calls the project\'s own code made into the original extension `{label}`,',
        f"recorded by `publisher adopt --record` (from {shown}) and kept in recorded/{recorded},",
        "made again on the kernel, loaded the way users load it. Each must give what the original gave: integers",
        "and booleans exactly, floats within the original's own run-to-run spread and at least",
        "torch.testing.assert_close's default tolerance for their dtype; what a call writes into its arguments is",
        "compared too. Record again (`publisher adopt --record --force`) after changing what an op computes.\"\"\"",
        "",
        "import base64",
        "import json",
        "import math",
        "import pathlib",
        "import re",
        "",
        *([] if package else ["import kernels"]),
        "import pytest",
        "import torch",
        "",
        f"CHECKED = {json.dumps(protocol.CHECKED)}  # publisher test: what a passing test checked (the verdict says it)",
        f"CHECKED_ORIGINAL = {json.dumps(protocol.CHECKED_ORIGINAL)}",
        f"REPLAYED = {json.dumps(protocol.REPLAYED)}  # publisher test: the op and the program its call came from",
        f"NEEDS_INPUTS = {json.dumps(protocol.NEEDS_INPUTS)}",
        f"NOT_REGISTERED = {json.dumps(protocol.NOT_REGISTERED)}",
        f"NO_KERNEL_FOR_BACKEND = re.compile({json.dumps(protocol.NO_KERNEL_FOR_BACKEND)})",
        f"FATAL_DEVICE_ERROR = re.compile({json.dumps(protocol.FATAL_DEVICE_ERROR)}, re.I)",
        f"SCHEMA_MISMATCH = re.compile({json.dumps(protocol.SCHEMA_MISMATCH)})",
        f"DEFAULT_TOLERANCE = {json.dumps(DEFAULT_TOLERANCE)}  # torch.testing.assert_close's (rtol, atol)",
        "",
        *([f"import {package} as kernel  # as the project's tests import it: publisher test puts the variant first "
           "on the path under this name"] if package else [tests_gen.load_line(repo_id, version)]),
        *tests_gen.device_lines(devices),
        "",
        "# op -> where users call it",
        "FUNCTIONS = {",
        *(f'    "{op}": kernel' + "".join(f".{p}" for p in path.split(".") if p) + ","
          for op, path in sorted(paths.items())),
        "}",
        f'CALLS = json.loads((pathlib.Path(__file__).parent / "recorded" / {json.dumps(recorded)}).read_text())["calls"]',
        "",
        "",
        "def _decode(value, device):",
        "    \"\"\"A recorded value; a tensor recorded on an accelerator goes to the variant's device.\"\"\"",
        "    if not isinstance(value, dict):",
        "        return value",
        "    kind = value[\"t\"]",
        "    if kind == \"tensor\":",
        "        dtype = getattr(torch, value[\"dtype\"])",
        "        raw = base64.b64decode(value[\"data\"])",
        "        t = (torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(value[\"shape\"]) if raw",
        "             else torch.empty(value[\"shape\"], dtype=dtype))",
        "        return t.to(\"cpu\" if value[\"device\"] == \"cpu\" else device)",
        "    if kind in (\"list\", \"tuple\"):",
        "        items = [_decode(v, device) for v in value[\"items\"]]",
        "        return items if kind == \"list\" else tuple(items)",
        "    if kind == \"float\":",
        "        return float(value[\"v\"])",
        "    if kind == \"dtype\":",
        "        return getattr(torch, value[\"v\"])",
        "    if kind == \"device\":",
        "        return torch.device(\"cpu\" if value[\"v\"] == \"cpu\" else device)",
        "    raise ValueError(f\"recorded value of unknown kind {kind!r}\")",
        "",
        "",
        "def _flat(value):",
        "    if isinstance(value, (list, tuple)):",
        "        return [x for v in value for x in _flat(v)]",
        "    return [value]",
        "",
        "",
        "def _recorded_on(value):",
        "    if isinstance(value, dict) and value.get(\"t\") == \"tensor\" and value[\"device\"] != \"cpu\":",
        "        return {value[\"device\"]}",
        "    if isinstance(value, dict) and \"items\" in value:",
        "        return set().union(*(_recorded_on(v) for v in value[\"items\"]))",
        "    return set()",
        "",
        "",
        *tests_gen.FIRST_LINE,
        "",
        "",
        "def _compare(what, got, expected, spread):",
        "    \"\"\"`spread`: how far the original's second call on the same inputs was from its first (0.0: the same; None:",
        "    a difference no number says, so only the shape and dtype are compared).\"\"\"",
        "    if isinstance(expected, torch.Tensor):",
        "        assert isinstance(got, torch.Tensor), f\"{what}: the original gave a tensor, the kernel {type(got).__name__}\"",
        "        got, expected = got.detach().cpu(), expected.cpu()",
        "        assert (got.shape, got.dtype) == (expected.shape, expected.dtype), \\",
        "            f\"{what}: {tuple(got.shape)} {got.dtype}, the original gave {tuple(expected.shape)} {expected.dtype}\"",
        "        if spread is None:",
        "            return",
        "        if expected.is_floating_point() or expected.is_complex():",
        "            rtol, atol = DEFAULT_TOLERANCE.get(str(expected.dtype).removeprefix(\"torch.\"), (1.3e-6, 1e-5))",
        "            torch.testing.assert_close(got, expected, rtol=rtol, atol=atol + 2 * spread, equal_nan=True,",
        "                                       msg=lambda m: f\"{what}: \" + \"; \".join(x.strip() for x in m.splitlines() if x.strip()))",
        "        else:",
        "            differ = int((got != expected).sum())",
        "            assert differ == 0, (f\"{what}: {differ} of {expected.numel()} values differ from the original's \"",
        "                                 \"(integers and booleans are compared exactly)\")",
        "    elif isinstance(expected, float) and isinstance(got, float):",
        "        assert math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9) or (math.isnan(got) and math.isnan(expected)), \\",
        "            f\"{what}: {got!r}, the original gave {expected!r}\"",
        "    else:",
        "        assert got == expected, f\"{what}: {got!r}, the original gave {expected!r}\"",
        "",
        "",
        "def _refused(name, where, err, recorded_on):",
        "    \"\"\"The kernel raised where the original returned.\"\"\"",
        "    if FATAL_DEVICE_ERROR.search(_first_line(err)):",
        "        pytest.fail(f\"{name} broke the {DEVICE} device on {where}: {_first_line(err)}\", pytrace=False)",
        "    missing = NO_KERNEL_FOR_BACKEND.search(str(err))",
        "    if missing:",
        "        pytest.skip(f\"{NOT_REGISTERED}: {name} has no kernel for the {missing.group(1)} backend, the device of \"",
        "                    f\"{where}; the kernel's registration leaves it out there\")",
        "    if SCHEMA_MISMATCH.search(str(err)):",
        "        pytest.skip(f\"{NEEDS_INPUTS}: the kernel's schema of {name} does not take {where} as the original did \"",
        "                    f\"({_first_line(err)}): the port's registration, not what {name} computes; give the schema \"",
        "                    \"the argument's type or default the original's binding has\")",
        "    here = torch.device(DEVICE).type",
        "    if recorded_on and recorded_on != {here}:",
        "        pytest.skip(f\"{NEEDS_INPUTS}: {name} refused {where}, recorded on {', '.join(sorted(recorded_on))}, \"",
        "                    f\"given here on {here} ({_first_line(err)})\")",
        "    pytest.fail(f\"{name} raised on {where}, where the original returned: {_first_line(err)}\", pytrace=False)",
        "",
        "",
        *(["@pytest.mark.kernels_ci"] if ci_subset else []),
        "@pytest.mark.parametrize(\"index\", range(len(CALLS)), ids=[f\"{c['op']}-{i}\" for i, c in enumerate(CALLS)])",
        "def test_call_gives_what_the_original_gave(index, record_property):",
        "    call = CALLS[index]",
        "    name = call[\"op\"]",
        "    where = f\"the call recorded from {call['from']}\" + (f\" ({call['where']})\" if call.get(\"where\") else \"\")",
        "    args = _decode(call[\"args\"], DEVICE)",
        "    kwargs = {k: _decode(v, DEVICE) for k, v in call[\"kwargs\"].items()}",
        "    given = [t for t in _flat([*args, *kwargs.values()]) if isinstance(t, torch.Tensor)]",
        "    try:",
        "        with torch.no_grad():",
        "            result = getattr(FUNCTIONS[name], name)(*args, **kwargs)",
        "        if torch.device(DEVICE).type == \"cuda\":",
        "            torch.cuda.synchronize()",
        "    except Exception as err:  # noqa: BLE001 - whatever the kernel raises is its answer to the original's inputs",
        "        _refused(name, where, err, set().union(*map(_recorded_on, [call[\"args\"], *call[\"kwargs\"].values()])))",
        "    spread = iter(call.get(\"spread\") or [])",
        "    expected = _flat(_decode(call[\"result\"], \"cpu\"))",
        "    got = _flat(result)",
        "    assert len(got) == len(expected), f\"{name} on {where}: {len(got)} output(s), the original gave {len(expected)}\"",
        "    for i, (mine, theirs) in enumerate(zip(got, expected)):",
        "        _compare(f\"{name} on {where}: output {i}\", mine, theirs,",
        "                 next(spread, 0.0) if isinstance(theirs, torch.Tensor) else 0.0)",
        "    for i, value in sorted(call.get(\"mutated\", {}).items(), key=lambda kv: int(kv[0])):",
        "        _compare(f\"{name} on {where}: tensor argument {i} as the call left it\", given[int(i)],",
        "                 _decode(value, \"cpu\"), next(spread, 0.0))",
        "    record_property(CHECKED, CHECKED_ORIGINAL)",
        "    record_property(REPLAYED, f\"{name} {call['from']}\")",
        "",
    ]
    return "\n".join(lines)
