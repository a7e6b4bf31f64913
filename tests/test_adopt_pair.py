"""A CPU extension beside a CUDA one (longcw/RoIAlign.pytorch's shape) becomes
one kernel with a cpu and a cuda variant; the tests adopt writes for it call
each op on the device of the variant under test (its metadata.json names the
backend), so the cpu variant is judged on the CPU, never failed for asking a
torch without CUDA for a CUDA tensor. In a GPU variant every function a
pybind11 module bound answers the tensors the module took, CPU ones too: a
CPU twin's kernel for CPU tensors where the pair has one, else the function
itself."""

from __future__ import annotations

import json
import re

import pytest

from publisher.adopt.plan import make_plan

from adopt_fixtures import write_cpu_in_cuda_project, write_namespaced_pair_project, write_pair_project
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix


def test_the_generated_tests_of_a_cpu_and_cuda_pair_run_on_the_variants_device(tmp_path):
    plan = make_plan(write_pair_project(tmp_path / "pair"))
    assert 'backends = ["cpu", "cuda"]' in next(c.new for c in plan.changes if c.path == "build.toml")
    text = next(c.new for c in plan.changes if c.path == "tests/test_pair_ops.py")
    assert 'DEVICE = "cuda"' not in text
    # the device is read from the loaded variant, after the kernel is loaded
    assert text.index("kernel = kernels.get_kernel(") < text.index("DEVICE = DEVICE_TYPES[")
    assert '["backend"]["type"]' in text


@pytest.mark.slow
def test_the_cpu_variant_of_a_cpu_and_cuda_pair_passes_on_the_cpu(tmp_path):
    root = write_pair_project(tmp_path / "pair")
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    done = run_cli("adopt", str(root), "--force", "--license", "mit")
    assert done.returncode == 0, done.output
    made = run_cli("build", str(root), "--local", timeout=1200)
    assert made.returncode == 0, made.output
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    # forward ran on CPU tensors and wrote its output: passed, resting on ops run (no reference in the project)
    assert variant["status"] == "passed", variant
    assert variant["tests"]["failed"] == 0 and variant["checks"] == {"ran": 1, "reference": 0}, variant


def _registration(plan, path: str) -> str:
    text = next(c.new for c in plan.changes if c.path == path)
    return text[text.index('#include "registration.h"'):text.index("#else\nPYBIND11_MODULE")]


def _blocks(registration: str) -> list[tuple[str, list[str]]]:
    """(dispatch key, ops) of each TORCH_LIBRARY_IMPL_EXPAND block, in order."""
    return [(m.group(1), re.findall(r'ops\.impl\("(\w+)"', m.group(2)))
            for m in re.finditer(r"TORCH_LIBRARY_IMPL_EXPAND\(TORCH_EXTENSION_NAME, (\w+), ops\) \{(.*?)\n\}",
                                 registration, re.S)]


def test_a_cuda_extensions_functions_answer_cpu_tensors_too(tmp_path):
    # GeoTransformer's CUDAExtension holds CPU code (CHECK_CPU); a pybind11 function took whatever its C++ accepts,
    # so the cuda variant registers each for CPU as well as CUDA (on the GPU machine: "Could not run ... with
    # arguments from the 'CPU' backend" before)
    plan = make_plan(write_cpu_in_cuda_project(tmp_path / "neighbors"))
    every = ["count_within", "pairs_within", "doubled"]
    assert _blocks(_registration(plan, "neighbors/csrc/radius.cpp")) == [("CUDA", every), ("CPU", every)]


def test_a_pair_leaves_each_twin_to_its_own_device_and_registers_the_rest_for_both(tmp_path):
    plan = make_plan(write_namespaced_pair_project(tmp_path / "pair"))
    # the CUDA extension: `forward` for CUDA only (its CPU twin answers CPU tensors), the function that picks its
    # code on the device for both
    assert _blocks(_registration(plan, "pair/src/scale_gpu.cpp")) == [("CUDA", ["forward", "positive_part"]),
                                                                      ("CPU", ["positive_part"])]
    # the CPU extension, compiled into both variants: in the cuda one its own function answers CUDA tensors too
    cpu = _registration(plan, "pair/src/scale.cpp")
    in_cpu_variant = cpu[cpu.index("#if defined(CPU_KERNEL)"):cpu.index("#elif defined(CUDA_KERNEL)")]
    in_cuda_variant = cpu[cpu.index("#elif defined(CUDA_KERNEL)"):]
    assert _blocks(in_cpu_variant) == [("CPU", ["forward", "scaled_sum"])]
    assert _blocks(in_cuda_variant) == [("CUDA", ["scaled_sum"]), ("CPU", ["forward", "scaled_sum"])]


def test_a_pair_of_twins_only_registers_each_for_its_own_device(tmp_path):
    # torchsort / RoIAlign.pytorch: every function in both extensions; as before, one kernel per device
    plan = make_plan(write_pair_project(tmp_path / "pair"))
    assert _blocks(_registration(plan, "pair/src/scale.cpp")) == [("CPU", ["forward"])]
    assert _blocks(_registration(plan, "pair/src/scale_gpu.cpp")) == [("CUDA", ["forward"])]
    assert "#if defined(" not in _registration(plan, "pair/src/scale.cpp")
