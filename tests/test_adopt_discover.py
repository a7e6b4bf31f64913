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
