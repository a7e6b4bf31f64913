"""Finding the extension (publisher/adopt/discover.py, evaluate.py): setup.py
read statically, or run with recorders that build, install and download
nothing; load() calls; the build.toml layout; clear errors otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from publisher.adopt import discover as discover_module
from publisher.adopt.discover import discover
from publisher.errors import ProjectError, UsageError

from adopt_fixtures import write, write_dynamic_project, write_layout_project, write_load_project, write_setup_project


def _listing(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_setup_py_of_literals_globs_and_variables_is_read_without_running_it(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    found = discover(root)
    assert (found.route, found.how, found.setup_name) == ("setup.py", "static", "mini-ops")
    (ext,) = found.extensions
    assert ext.module == "mini_ops._C" and ext.backend == "cpu"
    assert ext.sources == ("csrc/binding.cpp", "csrc/ops.cpp")  # sorted(glob(...)), relative to the project
    assert ext.defines == ("MINI_SCALE=1",) and ext.cxx_flags == ("-O3", "-std=c++17", "-DMINI_FAST")
    assert [(p.name, p.path) for p in found.packages] == [("mini_ops", "mini_ops")]
    assert found.findings == ()


def test_a_setup_py_only_running_can_read_runs_with_recorders_and_builds_nothing(tmp_path):
    root = write_dynamic_project(tmp_path / "dyn")
    before = _listing(root)
    found = discover(root)
    assert (found.route, found.how) == ("setup.py", "executed")
    (ext,) = found.extensions
    # torch.cuda.is_available() answers True there: the CUDA extension is the one recorded
    assert (ext.module, ext.backend, ext.sources) == ("dyn_ext", "cuda", ("dyn.cpp", "dyn_kernel.cu"))
    codes = {f.code: f for f in found.findings}
    assert "PA103" in codes and "torch.cuda.is_available" in codes["PA103"].message
    assert "git describe" in codes["PA104"].message  # the subprocess it tried was refused
    assert _listing(root) == before  # nothing compiled, written or installed in the project


def test_a_setup_py_that_writes_and_runs_programs_touches_only_a_scratch_copy(tmp_path):
    root = write(tmp_path / "sneaky", {
        "setup.py": "import os\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n"
                    "open('generated_version.py', 'w').write('v = 1')\nos.system('touch BUILT')\n"
                    "import torch\nif torch.__version__:\n    pass\n"
                    "setup(name='s', ext_modules=[CppExtension('s_ext', ['s.cpp'])] if torch.__version__ else [])\n",
        "s.cpp": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n"})
    before = _listing(root)
    found = discover(root)
    assert found.how == "executed" and found.extensions[0].module == "s_ext"
    assert any(f.code == "PA104" and "os.system" in f.message for f in found.findings)
    assert _listing(root) == before


def test_a_setup_py_that_never_finishes_is_stopped(tmp_path, monkeypatch):
    root = write(tmp_path / "slow", {"setup.py": "import torch\nwhile torch.cuda.is_available():\n    pass\n"})
    monkeypatch.setattr(discover_module, "EXEC_TIMEOUT", 3.0)
    with pytest.raises(ProjectError) as refused:
        discover(root)
    assert "still running after 3 s" in refused.value.message


def test_a_broken_setup_py_is_an_error_naming_the_line(tmp_path):
    root = write(tmp_path / "broken", {"setup.py": "from setuptools import setup\nsetup(name='x',\n"})
    with pytest.raises(ProjectError) as refused:
        discover(root)
    assert "setup.py:" in refused.value.message and "not valid Python" in refused.value.message


def test_load_calls_are_found_and_modules_win_over_scripts(tmp_path):
    root = write_load_project(tmp_path / "attn")
    found = discover(root)
    assert (found.route, found.how) == ("load()", "static")
    (ext,) = found.extensions
    assert ext.module == "mini_attn" and ext.sources == ("main.cpp", "kern.cu") and ext.backend == "cuda"
    assert ext.nvcc_flags == ("-O2", "-gencode", "arch=compute_80,code=[sm_80,compute_80]")  # attention.py's, not bench.py's
    assert found.wrappers == ("attention.py",)  # bench.py runs work at import: a script, not the API


def test_the_agent_layout_is_read_from_its_build_toml(tmp_path):
    root = write_layout_project(tmp_path / "agent")
    found = discover(root)
    assert found.route == "build.toml" and found.existing.name == "agent_kernels"
    assert found.extensions[0].sources == ("torch-ext/torch_binding.cpp", "kernel_src/relu.cu")


def test_without_an_extension_the_error_says_what_was_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProjectError) as refused:
        discover(tmp_path / "empty")
    assert "no torch extension found" in refused.value.message
    write(tmp_path / "many", {"a/setup.py": "", "b/setup.py": ""})
    with pytest.raises(ProjectError) as refused:
        discover(tmp_path / "many")
    assert "a, b" in refused.value.message.replace(os.sep, "/")
    with pytest.raises(UsageError):
        discover(tmp_path / "missing")


# Dao-AILab's pattern (fast-hadamard-transform, causal-conv1d): the flags depend on `nvcc -V` under CUDA_HOME
NVCC_VERSION_SETUP = """\
import subprocess
from packaging.version import Version
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension, CUDA_HOME

def get_cuda_bare_metal_version(cuda_dir):
    raw_output = subprocess.check_output([cuda_dir + "/bin/nvcc", "-V"], universal_newlines=True)
    output = raw_output.split()
    return raw_output, Version(output[output.index("release") + 1].split(",")[0])

cc_flag = []
if CUDA_HOME is not None:
    _, bare_metal_version = get_cuda_bare_metal_version(CUDA_HOME)
if bare_metal_version >= Version("12.8"):
    cc_flag += ["-gencode", "arch=compute_100,code=sm_100"]
setup(name="fht", ext_modules=[CUDAExtension("fht_cuda", ["k.cu"], extra_compile_args={"nvcc": ["-O3"] + cc_flag})],
      cmdclass={"build_ext": BuildExtension})
"""


def test_a_setup_py_asking_nvcc_its_version_is_answered_as_on_a_machine_with_cuda(tmp_path):
    root = write(tmp_path / "fht", {"setup.py": NVCC_VERSION_SETUP, "k.cu": "// kernel\n"})
    found = discover(root)
    (ext,) = found.extensions
    assert found.how == "executed" and ext.module == "fht_cuda" and "arch=compute_100,code=sm_100" in ext.nvcc_flags
    (answered,) = [f for f in found.findings if f.code == "PA105"]
    assert "nvcc -V: release 13.0" in answered.message and "CUDA_HOME" in answered.message
    assert str(tmp_path) not in answered.message and "publisher-adopt-" not in answered.message


def test_a_setup_py_that_only_packages_leaves_the_extension_to_the_packages_load_call(tmp_path):
    # KNN_CUDA: setup.py has no ext_modules; knn_cuda/__init__.py builds the extension with load() through a function
    init = ("import os\nfrom torch.utils.cpp_extension import load\n\n"
            "def load_cpp_ext(ext_name):\n"
            "    root_dir = os.path.join(os.path.split(__file__)[0])\n"
            "    os.makedirs(os.path.join(root_dir, '_ext'), exist_ok=True)\n"
            "    return load(name=ext_name, sources=[os.path.join(root_dir, 'csrc', ext_name + '.cu')])\n\n"
            "_knn = load_cpp_ext('knn')\n")
    root = write(tmp_path / "KNN", {"setup.py": "from setuptools import setup, find_packages\n"
                                                "setup(name='KNN_CUDA', packages=find_packages())\n",
                                    "knn_cuda/__init__.py": init, "knn_cuda/csrc/knn.cu": "// kernel\n"})
    found = discover(root)
    assert found.route == "load()" and [e.module for e in found.extensions] == ["knn"]
    assert found.extensions[0].sources == ("knn_cuda/csrc/knn.cu",)
    assert [(p.name, p.path) for p in found.packages] == [("knn_cuda", "knn_cuda")]
    assert found.load_sites == (("knn_cuda/__init__.py", 9, "knn"),)
