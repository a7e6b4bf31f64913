"""What a variant folder holds: a Python-only build keeps its package data
(never bytecode); a kernel compiled with -fopenmp links libgomp itself."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from build_fixtures import write_noarch_project, write_tiny_project
from cli_helper import run_cli


def test_python_only_build_keeps_package_data(tmp_path):
    project = write_noarch_project(tmp_path / "tiny-noarch")
    package = project / "torch-ext" / "tiny_noarch"
    (package / "py.typed").write_text("")
    (package / "configs").mkdir()
    (package / "configs" / "tuned.json").write_text('{"block": 128}\n')
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0bytecode")
    (package / "stale.pyc").write_bytes(b"\0bytecode")
    result = run_cli("build", str(project), "--local", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    for variant in ("torch-cpu", "torch-cuda"):
        built = project / "build" / variant
        files = {p.relative_to(built).as_posix() for p in built.rglob("*") if p.is_file()}
        assert {"py.typed", "configs/tuned.json", "__init__.py", "_ops.py", "metadata.json"} <= files
        assert not [f for f in files if f.endswith(".pyc") or "__pycache__" in f]


OPENMP_CPP = """\
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include "scale.h"

void scale_floats(float *dst, const float *src, int64_t n, float factor) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * factor;
}

void scale(at::Tensor &out, at::Tensor const &input, double factor) {
  TORCH_CHECK(input.scalar_type() == at::kFloat && input.is_contiguous(), "contiguous float32 only");
  scale_floats(out.data_ptr<float>(), input.data_ptr<float>(), input.numel(), static_cast<float>(factor));
}
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is needed to read NEEDED entries")
def test_openmp_is_linked_where_it_is_compiled(tmp_path):
    project = write_tiny_project(tmp_path / "tiny")
    toml = project / "build.toml"
    toml.write_text(toml.read_text().replace(
        'src = ["scale_cpu/scale.cpp", "scale_cpu/scale.h"]\n',
        'src = ["scale_cpu/scale.cpp", "scale_cpu/scale.h"]\ncxx-flags = ["-fopenmp"]\n'))
    (project / "scale_cpu" / "scale.cpp").write_text(OPENMP_CPP)
    result = run_cli("build", str(project), "--local", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (library,) = (project / "build").glob("torch*-cpu-*/*.so")
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert any("libgomp" in line for line in needed), dynamic
