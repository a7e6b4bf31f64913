"""A THC-era extension adopted: the torch C++ APIs torch removed are ported
where the replacement is exact (THC headers, THCudaCheck, the THC state and
stream, THCCeilDiv, AT_CHECK, x.type() given to AT_DISPATCH, .data<T>()),
shown in the plan; what has no exact replacement is a located error with
its fix. The table and the port are publisher/project/removed_apis.py's,
the same `check` reads."""

from __future__ import annotations

import json
import re

import pytest

from adopt_fixtures import THC_CU, write_thc_project
from cli_helper import run_cli
from matrix_fixtures import CU130_MATRIX


def test_a_thc_era_extension_is_ported_and_passes_check(tmp_path):
    root = write_thc_project(tmp_path / "roipool")
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    report = json.loads(done.stdout)
    ported = {f["file"]: f for f in report["findings"] if f["code"] == "PA181"}
    assert set(ported) == {"src/roi_pool.cpp", "src/roi_pool_kernel.cu"}
    assert not [f for f in report["findings"] if f["code"] == "PA182"]
    kernel = (root / "src/roi_pool_kernel.cu").read_text()
    assert not re.search(r"\bTH[A-Z]|AT_CHECK|\.data<|\.type\(\)", kernel)
    for replacement in ("#include <ATen/cuda/CUDAContext.h>", "#include <ATen/cuda/Atomic.cuh>",
                        "at::cuda::getCurrentCUDAStream()", "at::ceil_div(count, (int64_t)512)",
                        "AT_DISPATCH_FLOATING_TYPES(input.scalar_type()", "output.data_ptr<scalar_t>()",
                        "C10_CUDA_CHECK(cudaGetLastError())"):
        assert replacement in kernel
    binding = (root / "src/roi_pool.cpp").read_text()
    assert 'TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")' in binding and "THCState" not in binding
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output


def test_a_removed_api_without_an_exact_replacement_is_an_error_with_its_fix(tmp_path):
    root = write_thc_project(tmp_path / "blas")
    (root / "src/roi_pool_kernel.cu").write_text(THC_CU.replace(
        "  THCudaCheck(cudaGetLastError());",
        "  THCudaBlas_Sgemm(state, 'n', 'n', 1, 1, 1, 1.f, nullptr, 1, nullptr, 1, 0.f, nullptr, 1);\n"
        "  THCudaCheck(cudaGetLastError());"))
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 1, done.output  # written, with the part that needs hands named
    left = {f["message"].split("`")[1]: f for f in json.loads(done.stdout)["findings"] if f["code"] == "PA182"}
    sgemm = left["THCudaBlas_Sgemm"]
    assert sgemm["severity"] == "error" and sgemm["file"] == "src/roi_pool_kernel.cu" and "at::cuda::blas" in sgemm["hint"]
    written = (root / "src/roi_pool_kernel.cu").read_text().splitlines()  # lines of the file as adopt wrote it
    assert written[sgemm["line"] - 1].startswith("  THCudaBlas_Sgemm(state,")
    # the THC state it is given stays declared (it is still used), and is named too
    assert set(left) == {"THCudaBlas_Sgemm", "extern THCState *state;"}
    assert written[left["extern THCState *state;"]["line"] - 1] == "extern THCState *state;"


@pytest.mark.slow
def test_the_ported_thc_era_extension_compiles_for_cuda(tmp_path):
    """Against a PyPI CUDA torch with nvcc 13.0 (no GPU needed): before the port, THC/THC.h is not found."""
    root = write_thc_project(tmp_path / "roipool")
    done = run_cli("adopt", str(root), "--force")
    assert done.returncode == 0, done.output
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace('backend = "cuda"\n', 'backend = "cuda"\ncuda-capabilities = ["9.0"]\n', 1))
    matrix = tmp_path / "cu130.yaml"
    matrix.write_text(CU130_MATRIX)
    built = run_cli("build", str(root), "--matrix", str(matrix), "--json", timeout=3000)
    (entry,) = json.loads(built.stdout)["variants"]
    assert built.returncode == 0 and entry["state"] == "built" and entry["abi"]["ok"], built.output[-3000:]


# A widely copied style: multi-line check macros right above the op, and c10's old glog-style CHECK_EQ
MACROS_CPP = """\
#include <torch/extension.h>

#define CHECK_CPU(x) \\
  TORCH_CHECK(x.device().is_cpu(), #x " must be a CPU tensor")
#define CHECK_CONTIGUOUS(x) \\
  TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) \\
  CHECK_CPU(x);        \\
  CHECK_CONTIGUOUS(x)

torch::Tensor scale(torch::Tensor x, double factor) {
  CHECK_INPUT(x);
  CHECK_EQ(x.dim(), 2) << "x must be 2-d";
  return x * factor;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("scale", &scale, "scale");
}
"""


def test_an_op_after_continued_macros_is_found_and_renamed_check_macros_are_ported(tmp_path):
    root = tmp_path / "scaler"
    (root / "ext").mkdir(parents=True)
    (root / "ext/ops.cpp").write_text(MACROS_CPP)
    (root / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CppExtension\n"
        "setup(name='scaler', ext_modules=[CppExtension('scaler_ext', ['ext/ops.cpp'])],\n"
        "      cmdclass={'build_ext': BuildExtension})\n")
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    report = json.loads(done.stdout)
    assert not [f for f in report["findings"] if f["code"] == "PA111"], report["findings"]
    binding = (root / "torch-ext/torch_binding.cpp").read_text()
    assert "scale(Tensor x, float factor) -> Tensor" in binding
    ported = (root / "ext/ops.cpp").read_text()
    assert 'TORCH_CHECK_EQ(x.dim(), 2) << "x must be 2-d";' in ported and "#include <c10/util/Logging.h>" in ported
    assert any(f["code"] == "PA181" and "CHECK_EQ" in f["message"] for f in report["findings"]), report["findings"]
