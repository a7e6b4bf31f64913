"""A setup.py that builds its extension with or without CUDA (PyTorch's
extension tutorial: a CppExtension of the .cpp files where no GPU answers, a
CUDAExtension of those and the .cu files where one does) becomes a kernel
with a cpu backend beside cuda: adopt records the script a second time as on
a machine without CUDA and lists that build as the cpu kernel, its own
sources and flags. A script that cannot build without CUDA, or builds
something else there, stays CUDA-only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from adopt_fixtures import LIBRARY_CPP, LIBRARY_INIT, LIBRARY_OPS, write
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix

# extension-cpp's setup.py, cut down: the CUDA build adds the .cu files and a define
TUTORIAL_SETUP = """\
import glob
import os

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

use_cuda = os.getenv("USE_CUDA", "1") == "1" and torch.cuda.is_available() and CUDA_HOME is not None
extension = CUDAExtension if use_cuda else CppExtension
sources = sorted(glob.glob("libmath/csrc/*.cpp"))
args = {"cxx": ["-O3"]}
if use_cuda:
    sources += sorted(glob.glob("libmath/csrc/cuda/*.cu"))
    args["nvcc"] = ["-O3"]
setup(name="libmath", packages=["libmath"], ext_modules=[extension("libmath._C", sources, extra_compile_args=args)],
      cmdclass={"build_ext": BuildExtension})
"""

LIBRARY_CU = """\
#include <ATen/Operators.h>
#include <torch/all.h>
#include <torch/library.h>

namespace libmath {

at::Tensor muladd_cuda(const at::Tensor& a, const at::Tensor& b, double c) { return a * b + c; }

TORCH_LIBRARY_IMPL(libmath, CUDA, m) {
  m.impl("muladd", &muladd_cuda);
}

}  // namespace libmath
"""

# graspnet's knn: one pybind11 function whose CUDA path compiles only WITH_CUDA
PYBIND_SETUP = """\
import glob

import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

sources = ["src/vision.cpp"] + sorted(glob.glob("src/cpu/*.cpp"))
extension, macros = CppExtension, []
if torch.cuda.is_available() and CUDA_HOME is not None:
    extension, macros = CUDAExtension, [("WITH_CUDA", None)]
    sources += sorted(glob.glob("src/cuda/*.cu"))
setup(name="twice", ext_modules=[extension("twice._C", sources, define_macros=macros)],
      cmdclass={"build_ext": BuildExtension})
"""

PYBIND_VISION = """\
#include <torch/extension.h>
#ifdef WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

at::Tensor twice_cpu(const at::Tensor& x);
#ifdef WITH_CUDA
at::Tensor twice_cuda(const at::Tensor& x);
#endif

at::Tensor twice(const at::Tensor& x) {
  if (x.is_cuda()) {
#ifdef WITH_CUDA
    return twice_cuda(x);
#else
    AT_ERROR("Not compiled with GPU support");
#endif
  }
  return twice_cpu(x);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("twice", &twice, "x * 2");
}
"""

PYBIND_CPU = '#include <torch/extension.h>\nat::Tensor twice_cpu(const at::Tensor& x) { return x * 2; }\n'
PYBIND_CU = '#include <torch/extension.h>\nat::Tensor twice_cuda(const at::Tensor& x) { return x * 2; }\n'

# a project that refuses to build without CUDA
CUDA_ONLY_SETUP = """\
import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

if not torch.cuda.is_available():
    raise RuntimeError("this extension needs a CUDA GPU")
setup(name="twice", ext_modules=[CUDAExtension("twice._C", ["src/vision.cpp", "src/cpu/twice.cpp",
      "src/cuda/twice.cu"], define_macros=[("WITH_CUDA", None)])], cmdclass={"build_ext": BuildExtension})
"""

# without CUDA it builds a module of another name: not the same extension
OTHER_MODULE_SETUP = PYBIND_SETUP.replace('extension("twice._C"', 'extension("twice._C" if macros else "twice._cpu"')


def _tutorial(root: Path) -> Path:
    return write(root, {"setup.py": TUTORIAL_SETUP, "libmath/__init__.py": LIBRARY_INIT, "libmath/ops.py": LIBRARY_OPS,
                        "libmath/csrc/ops.cpp": LIBRARY_CPP, "libmath/csrc/cuda/ops.cu": LIBRARY_CU,
                        "LICENSE": "MIT License\n\nPermission is hereby granted, free of charge\n"})


def _pybind(root: Path, setup: str = PYBIND_SETUP) -> Path:
    return write(root, {"setup.py": setup, "src/vision.cpp": PYBIND_VISION, "src/cpu/twice.cpp": PYBIND_CPU,
                        "src/cuda/twice.cu": PYBIND_CU, "twice/__init__.py": "from ._C import twice\n",
                        "LICENSE": "MIT License\n\nPermission is hereby granted, free of charge\n"})


def _adopt(root: Path) -> dict:
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    return json.loads(done.stdout)


def _build_toml(root: Path) -> dict:
    return tomllib.loads((root / "build.toml").read_text())


def test_the_tutorial_form_gets_a_cpu_kernel_of_its_cpp_sources_beside_the_cuda_one(tmp_path):
    root = _tutorial(tmp_path / "libmath")
    report = _adopt(root)
    assert [f for f in report["findings"] if f["code"] == "PA108"], report["findings"]
    toml = _build_toml(root)
    assert toml["general"]["backends"] == ["cpu", "cuda"]
    kernels = {name: (table["backend"], table["src"]) for name, table in toml["kernel"].items()}
    assert kernels == {"libmath": ("cuda", ["libmath/csrc/ops.cpp", "libmath/csrc/cuda/ops.cu"]),
                       "libmath_cpu": ("cpu", ["libmath/csrc/ops.cpp"])}
    assert "cuda-flags" not in toml["kernel"]["libmath_cpu"]
    # both registrations moved to the kernel's namespace: the .cpp's in both variants, the .cu's in the cuda one
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, m)" in (root / "libmath/csrc/cuda/ops.cu").read_text()
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output
    # the generated tests call the ops on CPU tensors too
    written = "".join(p.read_text() for p in (root / "tests").glob("test_*.py"))
    assert '"cpu"' in written


def test_a_pybind11_function_dispatching_on_the_device_is_registered_per_variant(tmp_path):
    root = _pybind(tmp_path / "twice")
    report = _adopt(root)
    assert report["backends"] == ["cpu", "cuda"]
    toml = _build_toml(root)
    cpu, cuda = toml["kernel"]["twice_cpu"], toml["kernel"]["twice"]
    assert cpu["backend"] == "cpu" and cpu["src"] == ["src/vision.cpp", "src/cpu/twice.cpp"]
    # the script's own macros per build: WITH_CUDA only where the CUDA path compiles
    assert "-DWITH_CUDA" in cuda["cxx-flags"] and "-DWITH_CUDA" not in cpu.get("cxx-flags", [])
    vision = (root / "src/vision.cpp").read_text()
    cpu_block, cuda_block = vision.split("#if defined(CPU_KERNEL)")[1].split("#elif defined(CUDA_KERNEL)")
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops)" in cpu_block and "CUDA" not in cpu_block
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops)" in cuda_block.split("#endif")[0]
    assert run_cli("check", str(root)).returncode == 0


@pytest.mark.parametrize("setup", [CUDA_ONLY_SETUP, OTHER_MODULE_SETUP], ids=["refuses-without-cuda", "other-module"])
def test_a_script_without_the_same_build_without_cuda_stays_cuda_only(tmp_path, setup):
    root = _pybind(tmp_path / "twice", setup)
    report = _adopt(root)
    assert report["backends"] == ["cuda"]
    assert not [f for f in report["findings"] if f["code"] == "PA108"]
    assert list(_build_toml(root)["kernel"]) == ["twice"]


def test_a_build_without_cuda_that_includes_a_cuda_header_is_no_cpu_backend(tmp_path):
    # an extension-cpp fork whose .cpp files include cuda_runtime.h: its CppExtension cannot compile without CUDA
    root = _tutorial(tmp_path / "libmath")
    cpp = root / "libmath/csrc/ops.cpp"
    cpp.write_text(cpp.read_text().replace("#include <torch/library.h>\n", "#include <torch/library.h>\n"
                                           "#include <cuda_runtime.h>\n", 1))
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    report = json.loads(done.stdout)
    assert report["backends"] == ["cuda"] and not [f for f in report["findings"] if f["code"] == "PA108"]
    assert any("libmath/csrc/ops.cpp:4 includes <cuda_runtime.h>" in note for note in report["notes"]), report["notes"]


def test_the_recorder_answers_a_machine_without_cuda_as_one(tmp_path):
    probe = write(tmp_path / "probe", {"setup.py": (
        "import json, os, torch\nfrom setuptools import setup\nfrom torch.utils import cpp_extension\n"
        "json.dump({'gpu': torch.cuda.is_available(), 'home': cpp_extension.CUDA_HOME, 'cuda': torch.version.cuda,"
        " 'force': os.environ.get('FORCE_CUDA')}, open('answers.json', 'w'))\nsetup(name='probe')\n")})
    recorder = Path(__file__).resolve().parents[1] / "publisher/adopt/record_setup.py"
    seen = {}
    for mode in ("cuda", "cpu"):
        args = [sys.executable, str(recorder), str(tmp_path / f"{mode}.json"), "setup.py", "13.0"]
        subprocess.run(args + (["cpu"] if mode == "cpu" else []), cwd=probe, check=True, capture_output=True,
                       env={"PATH": "/usr/bin:/bin", "CUDA_HOME": "/usr/local/cuda", "FORCE_CUDA": "1"})
        seen[mode] = json.loads((probe / "answers.json").read_text())
    assert seen["cuda"]["gpu"] is True and seen["cuda"]["home"] and seen["cuda"]["cuda"]
    assert seen["cuda"]["force"] == "1"
    assert seen["cpu"] == {"gpu": False, "home": None, "cuda": None, "force": None}


@pytest.mark.slow
def test_the_cpu_variant_of_the_tutorial_form_builds_and_its_tests_pass(tmp_path):
    root = _tutorial(tmp_path / "libmath")
    _adopt(root)
    write_local_matrix(root / "matrix.yaml", compute="cpu")  # the running torch's cpu cell: no CUDA compile here
    built = run_cli("build", str(root), "--local", "--json", timeout=1200)
    assert built.returncode == 0, built.output
    (entry,) = json.loads(built.stdout)["variants"]
    assert "-cpu-" in entry["variant"] and entry["state"] == "built", entry
    tested = run_cli("test", str(root), "--json", timeout=1200)
    result = json.loads(tested.stdout)
    assert tested.returncode == 0, result
    (variant,) = result["variants"].values()
    assert variant["status"] == "passed" and variant["tests"]["failed"] == 0 and variant["tests"]["passed"] > 0
