"""Removed torch C++ APIs in the sources the build compiles: `check` reports
each use at its file and line (PB601 when no torch of the matrix compiles it,
PB602 when one still does), and `migrate --sources` ports the exact ones,
shows the diff, lists what is left, and writes all or nothing. The fixture is
shaped like a deformable-convolution CUDA extension of the torch 1.x days
ported to kernel-builder's layout: THC includes and state, THCudaMalloc,
THCudaBlas, `.data<T>()`, `x.type().is_cuda()`, a helper header included from
a source, and an old file the build no longer compiles."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from publisher.project.load import load_project
from publisher.project.rewrite import replace_texts

from cli_helper import run_cli

ROOT = Path(__file__).resolve().parents[1]

BUILD = """\
[general]
name = "deform-conv"
version = 1
edition = 5
license = "bsd-3-clause"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.deform_conv_cuda]
backend = "cuda"
depends = ["torch"]
include = ["deform_conv"]
src = ["deform_conv/deform_conv_cuda.cu", "deform_conv/deform_im2col.cu", "deform_conv/deform_im2col.h"]
"""

SOURCES = {
    "torch-ext/torch_binding.h": """\
        #pragma once
        #include <torch/torch.h>
        at::Tensor deform_conv_forward(const at::Tensor& input, const at::Tensor& weight);
        """,
    "torch-ext/torch_binding.cpp": """\
        #include <torch/library.h>
        #include "registration.h"
        #include "torch_binding.h"

        TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
          ops.def("deform_conv_forward(Tensor input, Tensor weight) -> Tensor");
          ops.impl("deform_conv_forward", torch::kCUDA, &deform_conv_forward);
        }

        REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
        """,
    "deform_conv/deform_conv_cuda.cu": """\
        #include <ATen/ATen.h>
        #include <THC/THC.h>
        #include <THC/THCAtomics.cuh>
        #include "deform_im2col.h"

        extern THCState *state;

        // THCudaCheck(cudaGetLastError()) used to follow every launch
        at::Tensor deform_conv_forward(const at::Tensor& input, const at::Tensor& weight) {
          AT_CHECK(input.type().is_cuda(), "input must be a CUDA tensor");
          auto columns = at::empty({input.size(0), weight.size(1)}, input.options());
          float** batch = static_cast<float**>(THCudaMalloc(state, input.size(0) * sizeof(float*)));
          deform_im2col(input.data<float>(), columns.data<float>(), input.numel());
          THCudaBlas_Sgemm(state, 'n', 'n', 1, 1, 1, 1.0f, columns.data<float>(), 1, weight.data<float>(), 1, 0.0f,
                           columns.data<float>(), 1);
          THCudaFree(state, batch);
          return columns;
        }
        """,
    "deform_conv/deform_im2col.h": """\
        #pragma once
        #include "cuda_helpers.h"
        void deform_im2col(const float* input, float* columns, int64_t n);
        """,
    "deform_conv/cuda_helpers.h": """\
        #pragma once
        inline int blocks_for(int n) { return THCCeilDiv(n, 512); }
        """,
    "deform_conv/deform_im2col.cu": """\
        #include "deform_im2col.h"
        const char* kMessage = "THCudaCheck failed";
        void deform_im2col(const float* input, float* columns, int64_t n) {
          THCudaCheck(cudaMemcpy(columns, input, n * sizeof(float), cudaMemcpyDeviceToDevice));
        }
        """,
    "legacy/deform_conv_th.cu": """\
        #include <THC/THC.h>
        void legacy(THCState* state) {}
        """,
    "torch-ext/deform_conv/__init__.py": "from ._ops import ops\n",
    "tests/test_deform_conv.py": "def test_nothing_yet():\n    pass\n",
}


def make_project(root: Path) -> Path:
    (root / "build.toml").parent.mkdir(parents=True, exist_ok=True)
    (root / "build.toml").write_text(BUILD)
    for name, text in SOURCES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _line(root: Path, name: str, needle: str) -> int:
    return next(n for n, text in enumerate((root / name).read_text().splitlines(), 1) if needle in text)


def _sources_findings(findings):
    return sorted((Path(f.file).relative_to(f.file.split("/deform/")[0] + "/deform").as_posix(), f.line, f.code)
                  for f in findings if f.code in ("PB601", "PB602"))


def test_check_reports_each_use_at_its_file_and_line(tmp_path):
    root = make_project(tmp_path / "deform")
    project, findings = load_project(root)
    found = _sources_findings(findings)
    cu = "deform_conv/deform_conv_cuda.cu"
    expected_errors = {
        (cu, _line(root, cu, "THC/THC.h")), (cu, _line(root, cu, "extern THCState")),
        (cu, _line(root, cu, "AT_CHECK")), (cu, _line(root, cu, "THCudaMalloc")), (cu, _line(root, cu, "THCudaBlas_Sgemm")),
        (cu, _line(root, cu, "THCudaFree")),
        ("deform_conv/cuda_helpers.h", 2),  # a header no src lists, included through deform_im2col.h
        ("deform_conv/deform_im2col.cu", 4),
    }
    assert {(f, line) for f, line, code in found if code == "PB601"} == expected_errors
    deprecated = {(f, line) for f, line, code in found if code == "PB602"}
    # THCAtomics.cuh: torch's CUDA builds still ship it, forwarding to ATen/cuda/Atomic.cuh
    assert deprecated == {(cu, _line(root, cu, "THCAtomics")), (cu, _line(root, cu, "AT_CHECK")),
                          (cu, _line(root, cu, "deform_im2col(input.data")),
                          (cu, _line(root, cu, "THCudaBlas_Sgemm")), (cu, _line(root, cu, "columns.data<float>(), 1);"))}
    assert not any("legacy/" in f for f, _, _ in found)  # the build does not compile it
    assert project is None  # errors: nothing is built from this
    error = next(f for f in findings if f.code == "PB601" and "THCudaMalloc" in f.message)
    assert "removed in torch 1.11" in error.message and "raw_alloc" in error.hint and "migrate --sources" in error.hint
    assert error.file == str(root / cu)


def test_the_cli_shows_every_use_with_its_fix(tmp_path):
    root = make_project(tmp_path / "deform")
    result = run_cli("check", str(root))
    assert result.returncode == 1
    assert re.search(r"^\s+2\s+error\s+PB601\s+deform_conv/cuda_helpers.h uses THCCeilDiv, removed in torch 1.11",
                     result.stdout, re.M), result.stdout
    assert "fix: use at::ceil_div(a, b)" in result.stdout


def _matrix(root: Path, *torches: str) -> Path:
    cells = "".join(f'  - version: "{v}"\n    flavours:\n      - {{compute: cu126, platforms: [x86_64-linux]}}\n'
                    for v in torches)
    path = root / "matrix.yaml"
    path.write_text(f"schema: 1\ntorch:\n{cells}")
    return path


@pytest.mark.parametrize("torches,code,says", [
    (("2.5", "2.6"), "PB602", "torch 2.6 of the matrix cannot compile it"),
    (("2.6", "2.7"), "PB601", "no torch of the matrix (torch 2.6, 2.7) compiles it"),
])
def test_an_api_one_torch_of_the_matrix_still_has_is_a_warning(tmp_path, torches, code, says):
    root = make_project(tmp_path / "deform")
    for name in ("deform_conv/deform_conv_cuda.cu", "deform_conv/deform_im2col.cu", "deform_conv/cuda_helpers.h"):
        (root / name).write_text('#include <ATen/Dispatch.h>\n'
                                 'void visit(const at::Tensor& x) { AT_DISPATCH_FLOATING_TYPES(x.type(), "v", [&] {}); }\n')
    _, findings = load_project(root, matrix=_matrix(tmp_path, *torches))
    uses = [f for f in findings if f.code in ("PB601", "PB602")]
    assert len(uses) == 3 and {f.code for f in uses} == {code} and all(says in f.message for f in uses), uses


@pytest.mark.parametrize("project", ["rmsnorm", "softcap"])
def test_the_example_kernels_are_clean(project):
    _, findings = load_project(ROOT / "kernel_projects" / project)
    assert not [f for f in findings if f.code.startswith("PB6")]


def test_migrate_sources_shows_the_diff_then_ports_and_lists_what_is_left(tmp_path):
    root = make_project(tmp_path / "deform")
    before = {name: (root / name).read_text() for name in SOURCES}
    shown = run_cli("migrate", str(root), "--sources", "--diff")
    assert {name: (root / name).read_text() for name in SOURCES} == before  # --diff writes nothing
    assert "\n-#include <THC/THC.h>\n" in shown.stdout and "\n+#include <ATen/cuda/CUDAContext.h>\n" in shown.stdout
    assert "+inline int blocks_for(int n) { return at::ceil_div(n, 512); }" in shown.stdout
    assert "would port 13 use(s) of removed torch C++ APIs in 3 source(s)" in shown.stdout

    done = run_cli("migrate", str(root), "--sources")
    assert done.returncode == 1, done.stdout + done.stderr  # uses without an exact replacement are left
    assert "ported 13 use(s) of removed torch C++ APIs in 3 source(s)" in done.stdout
    cu = (root / "deform_conv/deform_conv_cuda.cu").read_text()
    assert "TORCH_CHECK(input.is_cuda()," in cu and "c10::cuda::CUDACachingAllocator::raw_alloc(input.size(0)" in cu
    assert "#include <ATen/cuda/Atomic.cuh>" in cu and ".data<float>()" not in cu
    assert "// THCudaCheck(cudaGetLastError())" in cu  # comments are not code
    im2col = (root / "deform_conv/deform_im2col.cu").read_text()
    assert 'const char* kMessage = "THCudaCheck failed";' in im2col and "C10_CUDA_CHECK(cudaMemcpy" in im2col
    assert (root / "deform_conv/cuda_helpers.h").read_text().startswith("#pragma once\n#include <ATen/ceil_div.h>\n")
    assert (root / "legacy/deform_conv_th.cu").read_text() == before["legacy/deform_conv_th.cu"]  # not compiled
    left = re.findall(r"^  (\S+):(\d+): (.+)$", done.stdout, re.M)
    cu_name = "deform_conv/deform_conv_cuda.cu"
    assert [(f, int(line)) for f, line, _ in left] == [(cu_name, _line(root, cu_name, "extern THCState")),
                                                       (cu_name, _line(root, cu_name, "THCudaBlas"))]
    # check agrees: what is left is all it still refuses among the sources
    _, findings = load_project(root)
    assert [(f.code, f.line) for f in findings if f.code.startswith("PB6")] == [("PB601", int(line)) for _, line, _ in left]
    again = run_cli("migrate", str(root), "--sources")
    assert "ported" not in again.stdout and again.returncode == 1  # nothing more has an exact replacement


def test_a_failed_write_leaves_every_file_as_it_was(tmp_path, monkeypatch):
    files = {tmp_path / f"f{i}.cu": f"old {i}\n" for i in range(3)}
    for path, text in files.items():
        path.write_text(text)
    real_replace, calls = os.replace, []

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError):
        replace_texts({path: "new\n" for path in files})
    monkeypatch.setattr(os, "replace", real_replace)
    assert {path: path.read_text() for path in files} == files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f0.cu", "f1.cu", "f2.cu"]  # no temporary file left
