"""`check` on project folders: real layouts from the corpus (file names only,
recreated as empty files) and small projects with one layout problem each."""

from __future__ import annotations

import os
import shutil

import pytest

from publisher.project.load import load_project

from corpus_index import BUILD_TOMLS, LAYOUTS, cases, require_corpus
from test_check import GOOD


def _layouts():
    return cases(sorted(p.name for p in LAYOUTS.glob("*.txt") if p.name != "README.md") if LAYOUTS.is_dir() else [])


def materialize(root, listing: str):
    for rel in listing.splitlines():
        if rel.strip():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()


@pytest.mark.parametrize("layout", _layouts())
def test_real_layouts_pass(tmp_path, layout):
    require_corpus()
    materialize(tmp_path, (LAYOUTS / layout).read_text())
    # the corpus copy of this project's build.toml at HEAD
    shutil.copy(BUILD_TOMLS / layout.replace(".txt", "__build.toml"), tmp_path / "build.toml")
    if "deep-gemm" in layout:  # a git submodule: listed as one path, a folder in a checkout
        submodule = tmp_path / "torch-ext/deep_gemm/include/third-party/cutlass"
        submodule.unlink()
        submodule.mkdir()
    project, findings = load_project(tmp_path)
    layout_errors = [f for f in findings if f.code.startswith(("PB4", "PB6")) and f.is_error]
    assert not layout_errors, [(f.code, f.message) for f in layout_errors]
    has_tests = (tmp_path / "tests").is_dir()
    assert any(f.code == "PB406" for f in findings) == (not has_tests)


def project(tmp_path, text=GOOD):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "build.toml").write_text(text)
    for rel in ("torch-ext/torch_binding.cpp", "torch-ext/relu_kernel/__init__.py", "relu_cpu/relu.cpp",
                "relu_cuda/relu.cu", "tests/test_relu.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).touch()
    return tmp_path


def codes(findings):
    return {f.code for f in findings}


def test_complete_project_is_clean(tmp_path):
    loaded, findings = load_project(project(tmp_path))
    assert loaded is not None and loaded.root == tmp_path
    assert not [f for f in findings if f.severity.value != "info"]
    assert loaded.package_dir == tmp_path / "torch-ext/relu_kernel"


def test_missing_source_points_at_the_line(tmp_path):
    root = project(tmp_path)
    (root / "relu_cuda/relu.cu").unlink()
    loaded, findings = load_project(root)
    f = next(f for f in findings if f.code == "PB401")
    assert loaded is None
    assert f.file == str(root / "build.toml") and f.line == 23 and "relu_cuda/relu.cu" in f.message


def test_config_only_skips_layout(tmp_path):
    root = project(tmp_path)
    (root / "relu_cuda/relu.cu").unlink()
    loaded, findings = load_project(root, layout=False)
    assert loaded is not None and "PB401" not in codes(findings)


@pytest.mark.parametrize("path", ["../outside.cu", "/etc/passwd", "relu_cuda/../../x.cu", "C:\\\\src\\\\x.cu"])
def test_paths_may_not_leave_the_project(tmp_path, path):
    root = project(tmp_path / "p")
    (tmp_path / "outside.cu").touch()
    text = GOOD.replace('src = ["relu_cuda/relu.cu"]', f'src = ["{path}"]')
    (root / "build.toml").write_text(text)
    _, findings = load_project(root)
    assert "PB402" in codes(findings)


def test_symlink_pointing_outside(tmp_path):
    root = project(tmp_path / "p")
    (tmp_path / "secret.cu").touch()
    os.symlink(tmp_path / "secret.cu", root / "relu_cuda/linked.cu")
    _, findings = load_project(root)
    f = next(f for f in findings if f.code == "PB402")
    assert "linked.cu" in f.message
    # a symlink that stays inside is fine
    os.remove(root / "relu_cuda/linked.cu")
    os.symlink(root / "relu_cuda/relu.cu", root / "relu_cuda/linked.cu")
    assert "PB402" not in codes(load_project(root)[1])


def test_package_folder_and_binding(tmp_path):
    root = project(tmp_path)
    (root / "torch-ext/relu_kernel/__init__.py").unlink()
    assert "PB403" in codes(load_project(root)[1])
    root2 = project(tmp_path / "b", GOOD.replace('src = ["torch-ext/torch_binding.cpp"]', "src = []"))
    f = next(f for f in load_project(root2)[1] if f.code == "PB404")
    assert f.field == "torch.src" and f.line == 12


def test_generated_files_and_missing_tests_warn(tmp_path):
    root = project(tmp_path)
    (root / "torch-ext/relu_kernel/_ops.py").touch()
    (root / "torch-ext/registration.h").touch()
    shutil.rmtree(root / "tests")
    loaded, findings = load_project(root)
    warned = [f for f in findings if f.severity.value == "warning"]
    assert {f.code for f in warned} == {"PB405", "PB406"} and len(warned) == 3
    assert loaded is not None  # warnings only


def test_tvm_ffi_package_lives_in_tvm_ffi_ext(tmp_path):
    text = GOOD.replace("[torch]", "[tvm-ffi]").replace("torch-ext/torch_binding.cpp", "tvm-ffi-ext/tvm_ffi_binding.cpp")
    root = project(tmp_path, text)
    assert "PB403" in codes(load_project(root)[1])
    (root / "tvm-ffi-ext/relu_kernel").mkdir(parents=True)
    (root / "tvm-ffi-ext/relu_kernel/__init__.py").touch()
    (root / "tvm-ffi-ext/tvm_ffi_binding.cpp").touch()
    assert not [f for f in load_project(root)[1] if f.is_error]


PYBIND_BINDING = """\
// a binding written for torch.utils.cpp_extension, as burtenshaw/kernel-skill's LTX-Video example has it
#include <torch/extension.h>
#include "torch_binding.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("relu", &relu);
}
"""


def test_pybind11_in_a_compiled_source_is_refused_at_its_line(tmp_path):
    # the limited Python API the build compiles against has no pybind11: the build would fail minutes in
    root = project(tmp_path)
    (root / "torch-ext/torch_binding.cpp").write_text(PYBIND_BINDING)
    (root / "relu_cuda/relu.cu").write_text("#include <cuda_runtime.h>\n#include <pybind11/pybind11.h>\n")
    loaded, findings = load_project(root)
    refused = sorted((f.file, f.line, f.field) for f in findings if f.code == "PB407")
    assert loaded is None and all(f.is_error for f in findings if f.code == "PB407")
    assert refused == [(str(root / "relu_cuda/relu.cu"), 2, "kernel.relu_cuda.src"),
                       (str(root / "torch-ext/torch_binding.cpp"), 2, "torch.src"),
                       (str(root / "torch-ext/torch_binding.cpp"), 5, "torch.src")]
    f = next(f for f in findings if f.code == "PB407")
    assert "torch/library.h" in f.hint and "TORCH_LIBRARY_EXPAND" in f.hint


@pytest.mark.parametrize("text", [
    "// never #include <torch/extension.h> here\n#include <torch/library.h>\n",
    "/* the old binding:\n#include <torch/extension.h>\nPYBIND11_MODULE(x, m) {}\n*/\n#include <torch/all.h>\n",
    "#ifndef Py_LIMITED_API\n#include <pybind11/pybind11.h>\n#endif\n#include <torch/library.h>\n",
    '#include "pybind11_helpers.h"\n#include <torch/library.h>\n',
], ids=["line-comment", "block-comment", "conditional", "lookalike-name"])
def test_what_the_build_never_compiles_is_not_refused(tmp_path, text):
    root = project(tmp_path)
    (root / "torch-ext/torch_binding.cpp").write_text(text)
    assert "PB407" not in codes(load_project(root)[1])


def test_a_listed_header_is_not_read(tmp_path):
    # real projects (aiter-flash-attn-ck, deep-gemm) list headers that include pybind11 and are compiled
    # in only where it is allowed, or not at all
    root = project(tmp_path, GOOD.replace('src = ["relu_cuda/relu.cu"]', 'src = ["relu_cuda/relu.cu", "relu_cuda/py.hpp"]'))
    (root / "relu_cuda/py.hpp").write_text("#include <pybind11/pybind11.h>\n")
    assert "PB407" not in codes(load_project(root)[1])


def submodule_project(tmp_path, sub: str, text=GOOD):
    """A project in a git work tree whose .gitmodules names `sub` (relative to the project), left as a plain
    clone leaves it: an empty folder."""
    import subprocess
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    root = project(tmp_path / "relu", text)
    (tmp_path / ".gitmodules").write_text(f'[submodule "x"]\n\tpath = relu/{sub}\n\turl = https://github.com/NVIDIA/cutlass.git\n')
    (root / sub).mkdir(parents=True, exist_ok=True)
    return root


@pytest.mark.parametrize("sub, text", [
    ("torch-ext/relu_kernel/include/cutlass", GOOD),  # packaged with the Python package (deep-gemm's case)
    ("third_party/cutlass", GOOD.replace('src = ["relu_cuda/relu.cu"]', 'src = ["relu_cuda/relu.cu"]\ninclude = ["third_party/cutlass/include"]')),
    ("relu_cuda", GOOD),  # holds a listed source
], ids=["packaged", "included", "holds-src"])
def test_a_submodule_the_build_uses_must_be_checked_out(tmp_path, sub, text):
    root = submodule_project(tmp_path, sub, text)
    if sub == "relu_cuda":
        (root / "relu_cuda/relu.cu").unlink()  # as a fresh clone has it
    loaded, findings = load_project(root)
    f = next(f for f in findings if f.code == "PB408")
    assert loaded is None and f.is_error and f"`{sub}`" in f.message and "submodule update --init" in f.hint
    (root / sub / "README.md").write_text("checked out\n")
    if sub == "relu_cuda":
        (root / "relu_cuda/relu.cu").touch()
    assert "PB408" not in codes(load_project(root)[1])


def test_a_submodule_the_build_does_not_use_or_no_git_is_no_finding(tmp_path):
    root = submodule_project(tmp_path / "a", "benchmarks/third_party/bench")  # not built, not packaged
    assert "PB408" not in codes(load_project(root)[1])
    plain = project(tmp_path / "b")  # no git work tree: nothing to ask
    (plain / ".gitmodules").write_text('[submodule "x"]\n\tpath = torch-ext/relu_kernel/include\n')
    (plain / "torch-ext/relu_kernel/include").mkdir()
    assert "PB408" not in codes(load_project(plain)[1])


def test_a_hostile_gitmodules_is_read_without_a_traceback(tmp_path):
    root = submodule_project(tmp_path, "torch-ext/relu_kernel/sub")
    os.symlink("loop", root / "torch-ext/relu_kernel/loop")
    (tmp_path / ".gitmodules").write_bytes(
        b'[submodule "a"]\n\tpath = relu/torch-ext/\x00evil\n[submodule "b"]\n\tpath = /etc\n'
        b'[submodule "c"]\n\tpath = ../../..\n[submodule "d"]\n\tpath = relu/torch-ext/relu_kernel/loop\n'
        b'[submodule "e"]\n\tpath = "relu/torch-ext/relu_kernel/sub"\n\xff\xfe\n')
    _, findings = load_project(root)
    assert [f.file for f in findings if f.code == "PB408"] == [str(root / "torch-ext/relu_kernel/sub")]
