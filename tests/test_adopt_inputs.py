"""Inputs for adopt's generated tests come from the project's own calls of each
op (publisher/adopt/inputs.py), and the generated tests judge the kernel by the
verdict's rule: an op that refuses its inputs is "needs inputs" (skipped, with
the INPUTS line to edit), only a crash, a broken device or a result unlike the
project's reference fails. Quick: the generated file runs against a kernel
made of Python functions, nothing compiles."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from publisher.adopt import inputs, tests_gen
from publisher.adopt.plan import make_plan
from publisher.testing import protocol

from adopt_fixtures import write, write_cpu_in_cuda_project, write_index_project


def _ops(root: Path):
    return {op.name: op for op in make_plan(root).ops}


def _inputs_line(text: str, op: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f'    "{op}": lambda'))


def test_index_offsets_and_complex_inputs_come_from_the_wrappers_calls(tmp_path):
    root = write_index_project(tmp_path / "index")
    ops = _ops(root)
    derived = inputs.derive(root, list(ops.values()), ["index_ops._C"])
    assert set(derived) == {"gather_rows", "segment_sum", "magnitude"}  # pick: nothing in the project calls it
    assert derived["gather_rows"].site == "the call at index_ops/__init__.py:7"
    gather, _ = inputs.resolve(ops["gather_rows"], derived["gather_rows"])
    assert gather["index"].dtype == "int64" and gather["src"].dtype == "float32"  # `index.long()`
    segment, _ = inputs.resolve(ops["segment_sum"], derived["segment_sum"])
    assert segment["offsets"].dtype == "int32"  # `offsets.int()`
    # out = torch.zeros(offsets.numel() - 1, src.size(1)): its shape follows the other two arguments
    assert segment["out"].shape == (segment["offsets"].shape[0] - 1, segment["src"].shape[1])
    magnitude, _ = inputs.resolve(ops["magnitude"], derived["magnitude"])
    assert magnitude["z"].dtype == "complex64"  # torch.view_as_complex(pairs)


def test_the_generated_inputs_say_where_they_come_from_and_what_is_guessed(tmp_path):
    root = write_index_project(tmp_path / "index")
    plan = make_plan(root)
    text = next(c.new for c in plan.changes if c.path == "tests/test_index_ops_ops.py")
    assert "dtype=torch.int64" in _inputs_line(text, "gather_rows")
    assert "torch.zeros(7, 64, device=DEVICE), torch.randn(8, 64, device=DEVICE)" in _inputs_line(text, "segment_sum")
    assert "dtype=torch.int32" in _inputs_line(text, "segment_sum")
    assert "dtype=torch.complex64" in _inputs_line(text, "magnitude")
    # the wrapper's call, and what the op's C++ checks (`index.scalar_type() == torch::kLong`, `src.dim() == 2`)
    assert "# from the call at index_ops/__init__.py:7 and the checks in csrc/index.cpp:3" in text
    assert "# guessed from the C++ signature: nothing in the project calls pick" in text
    assert _inputs_line(text, "pick") == ('    "pick": lambda: (torch.randn(8, 64, device=DEVICE), '
                                          'torch.randn(8, 64, device=DEVICE)),')


CALLERS = {
    # an autograd Function around the op, its alias, and a test calling the alias with concrete tensors
    "index_ops/functions.py": """\
import torch
from torch.autograd import Function

from index_ops import _C


class GatherRows(Function):
    @staticmethod
    def forward(ctx, src, index):
        return _C.gather_rows(src, index.long())


gather_rows = GatherRows.apply
""",
    "tests/test_gather.py": """\
import torch
from index_ops.functions import gather_rows

ROWS = 10


def test_gather():
    src = torch.randn(ROWS, 3)
    index = torch.tensor([0, 2, 4], dtype=torch.int32)
    assert gather_rows(src, index).shape == (3, 3)
""",
    "README.md": """\
# index-ops

```python
>>> import torch, index_ops
>>> pairs = torch.randn(5, 4, 2)
>>> index_ops.magnitude(pairs)
```
""",
}


def test_shapes_come_from_the_callers_of_the_wrapper_a_test_and_the_readme(tmp_path):
    root = write(write_index_project(tmp_path / "index"), CALLERS)
    ops = _ops(root)
    derived = inputs.derive(root, list(ops.values()), ["index_ops._C"])
    gather, _ = inputs.resolve(ops["gather_rows"], derived["gather_rows"])
    # the test's tensors, through GatherRows.apply; the op's own cast (`index.long()`) wins over the test's int32
    assert derived["gather_rows"].site == "the call at tests/test_gather.py:10 through index_ops/functions.py:10"
    assert (gather["src"].shape, gather["index"].shape, gather["index"].dtype) == ((10, 3), (3,), "int64")
    magnitude, _ = inputs.resolve(ops["magnitude"], derived["magnitude"])
    assert derived["magnitude"].site == "the call at README.md:6 through index_ops/__init__.py:17"
    assert (magnitude["z"].shape, magnitude["z"].dtype) == ((5, 4), "complex64")


def test_sizes_given_by_an_int_argument_and_unpacked_shapes_agree(tmp_path):
    root = write(tmp_path / "fps", {
        "setup.py": "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, BuildExtension\n"
                    "setup(name='fps', ext_modules=[CppExtension('fps_ext', ['fps.cpp'])], "
                    "cmdclass={'build_ext': BuildExtension})\n",
        "fps.cpp": "#include <torch/extension.h>\n"
                   "void sample(torch::Tensor xyz, int64_t npoint, torch::Tensor& idx) {}\n"
                   "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"sample\", &sample); }\n",
        "fps.py": "import torch\nimport fps_ext\n\n\ndef furthest_point_sample(xyz, npoint):\n"
                  "    B, N, _ = xyz.size()\n"
                  "    idx = torch.zeros(B, npoint, dtype=torch.int32, device=xyz.device)\n"
                  "    fps_ext.sample(xyz.contiguous(), npoint, idx)\n    return idx\n",
        "bench.py": "import torch\nfrom fps import furthest_point_sample\n\n"
                    "furthest_point_sample(torch.randn(2, 1024, 3), 512)\n",
    })
    ops = _ops(root)
    derived = inputs.derive(root, list(ops.values()), ["fps_ext"])
    tensors, scalars = inputs.resolve(ops["sample"], derived["sample"])
    assert scalars["npoint"] == 512 and tensors["xyz"].shape == (2, 1024, 3)
    assert (tensors["idx"].shape, tensors["idx"].dtype) == ((2, 512), "int32")


POINTNET_CPP = {
    "setup.py": "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, BuildExtension\n"
                "setup(name='pn', ext_modules=[CppExtension('pn_ext', ['src/bindings.cpp', 'src/group.cpp'])], "
                "cmdclass={'build_ext': BuildExtension})\n",
    "src/utils.h": "#pragma once\n#include <torch/extension.h>\n"
                   "#define CHECK_IS_INT(x)                               \\\n"
                   "  do {                                                \\\n"
                   "    AT_ASSERT(x.scalar_type() == at::ScalarType::Int, \\\n"
                   "              #x \" must be an int tensor\");           \\\n"
                   "  } while (0)\n",
    "src/group.h": "#pragma once\n#include <torch/extension.h>\n"
                   "at::Tensor group_points(at::Tensor points, at::Tensor idx);\n",
    "src/group.cpp": "#include \"group.h\"\n#include \"utils.h\"\n\n"
                     "at::Tensor group_points(at::Tensor points, at::Tensor idx) {\n"
                     "  CHECK_IS_INT(idx);\n  TORCH_CHECK(points.dim() == 3 && points.size(2) == 3, \"(B, N, 3)\");\n"
                     "  TORCH_CHECK(idx.size(0) == points.size(0), \"one batch\");\n"
                     "  auto p = points.data_ptr<float>();\n  auto i = idx.accessor<int, 2>();\n"
                     "  return points;\n}\n",
    "src/bindings.cpp": "#include \"group.h\"\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                        "  m.def(\"group_points\", &group_points);\n}\n",
}


def test_what_the_ops_cpp_checks_fills_in_what_no_call_shows(tmp_path):
    root = write(tmp_path / "pn", POINTNET_CPP)  # nothing in Python calls the op; its C++ checks say what it takes
    text = next(c.new for c in make_plan(root).changes if c.path == "tests/test_pn_ops.py")
    assert "# from the checks in src/group.cpp:4" in text
    # idx: int32 (CHECK_IS_INT expanded, accessor<int, 2>), 2-d, as many rows as points; points: (8, 8, 3) float32
    assert _inputs_line(text, "group_points") == (
        '    "group_points": lambda: (torch.randn(8, 8, 3, device=DEVICE), '
        'torch.zeros(8, 8, dtype=torch.int32, device=DEVICE)),')
    assert not [f for f in make_plan(root).findings if f.code == "PA192"]


# --- the generated tests judge by the verdict's rule ------------------------------------------------

KERNEL_INIT = """\
import torch

from . import _ops


def gather_rows(src, index):
    if index.dtype != torch.int64:
        raise RuntimeError("index must be an int64 tensor")
    return src.index_select(0, index)


def double(x):
    return x * 2


def wrong(x):
    return x * 3


def wrong_ref(x):
    return x * 4


def crash(x):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def unregistered(x):  # torch's dispatcher, for an op registered for CUDA only called with CPU tensors
    raise NotImplementedError("Could not run '_k_cuda_1a2b::unregistered' with arguments from the 'CPU' backend. "
                              "This could be because the operator doesn't exist for this backend")
"""


def _run_generated(tmp_path: Path, op_inputs: dict[str, str], kernel: str = KERNEL_INIT
                   ) -> tuple[dict[str, str], dict[str, str], str]:
    """Write the generated test for ops of a kernel made of Python functions (a stand-in `kernels` loads it),
    run it with pytest; returns node -> outcome, node -> recorded check, and pytest's output."""
    from publisher.adopt.model import Op, OpArg
    from publisher.adopt.types import parse

    tensor = parse("torch::Tensor")
    signatures = (("gather_rows", ("src", "index")), ("double", ("x",)), ("wrong", ("x",)), ("crash", ("x",)),
                  ("unregistered", ("x",)))
    ops = [Op(name, name, tuple(OpArg(a, tensor) for a in args), tensor, None, "k.cpp", 1) for name, args in signatures]
    text = tests_gen.test_file(repo_id="org/k", version=1, devices=("cpu",), paths={}, module_label="k_ext", ops=ops,
                               references={"wrong": "kernel.wrong_ref"})
    for op, line in op_inputs.items():
        text = re.sub(rf'^    "{op}": lambda: .*$', f'    "{op}": {line},', text, flags=re.M)
    write(tmp_path, {"tests/test_k_ops.py": text, "stub/kernels/__init__.py":
                     "import importlib\n\n\ndef get_kernel(repo_id, version=None, trust_remote_code=None):\n"
                     "    return importlib.import_module('kern')\n",
                     "stub/kern/__init__.py": kernel, "stub/kern/_ops.py": "ops = None\n"})
    junit = tmp_path / "junit.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "tests", "-k", "runs_on_inputs", "-rs", "-q", "-p",
                           "no:cacheprovider", f"--junitxml={junit}", "-o", "junit_family=xunit1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(tmp_path / "stub"), "PATH": "/usr/bin:/bin"})
    outcomes, checked = {}, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = re.search(r"\[(\w+)\]", case.get("name")).group(1)
        outcomes[name] = ("skipped" if case.find("skipped") is not None else
                          "failed" if case.find("failure") is not None else "passed")
        for prop in case.iter("property"):
            if prop.get("name") == protocol.CHECKED:
                checked[name] = prop.get("value")
    return outcomes, checked, done.stdout + done.stderr


def test_a_refusal_is_needs_inputs_and_only_a_broken_device_or_a_wrong_result_fails(tmp_path):
    outcomes, checked, output = _run_generated(tmp_path, {})
    assert outcomes == {"gather_rows": "skipped", "double": "passed", "wrong": "failed", "crash": "failed",
                        "unregistered": "skipped"}, output
    # the skip names what was refused, why, and the line of INPUTS to edit
    line = next(n for n, text in enumerate((tmp_path / "tests/test_k_ops.py").read_text().splitlines(), 1)
                if text.startswith('    "gather_rows": lambda'))
    assert (f"{protocol.NEEDS_INPUTS}: gather_rows refused guessed inputs (RuntimeError: index must be an int64 "
            f"tensor); give INPUTS['gather_rows'] the shapes and dtypes it expects: tests/test_k_ops.py:{line}") \
        in output
    assert "crash broke the cpu device: RuntimeError: CUDA error: an illegal memory access" in output
    assert checked == {"double": protocol.CHECKED_RAN}


def test_an_op_without_a_kernel_for_its_inputs_device_is_not_registered_not_needs_inputs(tmp_path):
    # maskrcnn-benchmark's nms, GeoTransformer's radius_neighbors on the GPU machine: registered for CUDA only, called
    # with CPU tensors; torch's "Could not run ... from the 'CPU' backend" is the registration's gap, not the inputs'
    outcomes, _, output = _run_generated(tmp_path, {})
    assert outcomes["unregistered"] == "skipped", output
    line = next(n for n, text in enumerate((tmp_path / "tests/test_k_ops.py").read_text().splitlines(), 1)
                if text.startswith('    "unregistered": lambda'))
    reason = next(text for text in output.splitlines() if "unregistered" in text and "SKIPPED" in text)
    assert (f"{protocol.NOT_REGISTERED}: unregistered has no kernel for the CPU backend, the device of guessed inputs "
            "(NotImplementedError: Could not run '_k_cuda_1a2b::unregistered' with arguments from the 'CPU' backend."
            in reason), reason
    assert "register unregistered for CPU" in reason and reason.endswith(f"tests/test_k_ops.py:{line}")
    assert protocol.NEEDS_INPUTS not in reason


def test_inputs_that_fit_run_the_op_and_a_reference_match_is_recorded(tmp_path):
    fitting = "lambda: (torch.randn(8, 64, device=DEVICE), torch.zeros(8, dtype=torch.int64, device=DEVICE))"
    kernel = KERNEL_INIT.replace("return x * 3", "return x * 4")
    outcomes, checked, output = _run_generated(tmp_path, {"gather_rows": fitting}, kernel)
    assert outcomes["gather_rows"] == "passed" and checked["gather_rows"] == protocol.CHECKED_RAN, output
    assert outcomes["wrong"] == "passed" and checked["wrong"] == protocol.CHECKED_REFERENCE, output


def test_the_generated_tests_and_the_smoke_test_know_the_same_fatal_device_errors():
    from publisher.testing import default_test

    assert default_test._FATAL_DEVICE_ERROR.pattern == protocol.FATAL_DEVICE_ERROR


def test_reading_any_python_never_breaks_adopt():
    # publisher's own sources as a project: every construct they use, and calls of `runner.run(...)`,
    # `state.update_report(...)` read as calls of ops taking tensors and ints
    from publisher.adopt.model import Op, OpArg
    from publisher.adopt.types import parse

    tensor, integer = parse("torch::Tensor"), parse("int64_t")
    ops = [Op("run", "run", (OpArg("argv", tensor), OpArg("cwd", tensor), OpArg("timeout", integer)), tensor, None,
              "x.cpp", 1),
           Op("update_report", "update_report", (OpArg("path", tensor), OpArg("entries", tensor)), tensor, None,
              "x.cpp", 1)]
    derived = inputs.derive(Path(__file__).parents[1] / "publisher", ops, ["publisher.runner", "publisher.state"])
    assert set(derived) == {"run", "update_report"}
    for op in ops:
        tensors, _ = inputs.resolve(op, derived[op.name])
        assert all(t.dtype and all(d >= 0 for d in t.shape) for t in tensors.values())


def test_a_long_chain_of_reassignments_ends_in_a_guess_not_a_crash(tmp_path):
    chain = "    x = x.contiguous()\n" * 3000
    root = write(write_index_project(tmp_path / "index"), {
        "bench.py": f"import torch\nfrom index_ops import _C\n\n\ndef go(x):\n{chain}    return _C.magnitude(x)\n"})
    ops = _ops(root)
    derived = inputs.derive(root, [ops["magnitude"]], ["index_ops._C"])
    assert derived["magnitude"].site == "the call at index_ops/__init__.py:17"  # the wrapper's call, not bench.py


def test_an_op_that_checks_for_cpu_tensors_gets_cpu_tensors_in_the_cuda_variants_tests(tmp_path):
    # GeoTransformer: CPU code in a CUDAExtension, CHECK_CPU on each argument; on the GPU its generated test gave
    # it CUDA tensors, which it refused (needs inputs): never judged. A branch on the device is no requirement.
    plan = make_plan(write_cpu_in_cuda_project(tmp_path / "neighbors"))
    text = next(c.new for c in plan.changes if c.path == "tests/test_neighbors_ops.py")
    assert 'DEVICE = "cuda"' in text
    count = next(line for line in text.splitlines() if line.strip().startswith('"count_within": lambda'))
    assert count.count('device="cpu"') == 2 and "DEVICE" not in count and "dtype=torch.int64" in count
    doubled = next(line for line in text.splitlines() if line.strip().startswith('"doubled": lambda'))
    assert "device=DEVICE" in doubled
    # an op may answer a CUDA tensor with a CPU one (or the reverse): the result's device is no verdict
    assert "result.device" not in text


def test_batch_lengths_hold_every_row_of_their_tensor_not_zeros(tmp_path):
    # GeoTransformer's grid_subsampling(points, lengths, voxel_size) crashed on lengths of zeros beside 8 points
    # (an inconsistent batch of our making); q_lengths goes with q_points, s_lengths with s_points
    plan = make_plan(write_cpu_in_cuda_project(tmp_path / "neighbors"))
    text = next(c.new for c in plan.changes if c.path == "tests/test_neighbors_ops.py")
    count = next(line for line in text.splitlines() if line.strip().startswith('"count_within": lambda'))
    assert 'torch.tensor([8], dtype=torch.int64, device="cpu")' in count
    pairs = next(line for line in text.splitlines() if line.strip().startswith('"pairs_within": lambda'))
    assert "torch.randn(5, 64, device=DEVICE)" in pairs
    assert pairs.index('torch.tensor([8], dtype=torch.int64') < pairs.index('torch.tensor([5], dtype=torch.int64')
