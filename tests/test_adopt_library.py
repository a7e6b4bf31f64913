"""Projects that register their ops with torch's own API, adopted
(publisher/adopt/library.py): TORCH_LIBRARY / TORCH_LIBRARY_IMPL (PyTorch's
extension tutorial form), RegisterOperators chains (torch_scatter's form),
and a project mixing a pybind11 module with a TORCH_LIBRARY. The
registrations move to the kernel's own namespace, the schemas stay as
written, the Python side follows, and what adopt writes is what `check`
accepts: build.toml never names a file adopt did not write."""

from __future__ import annotations

import ast
import json
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from publisher.adopt import library
from publisher.adopt.plan import make_plan

from adopt_fixtures import (
    write,
    write_library_project,
    write_lookup_project,
    write_mixed_project,
    write_operators_project,
)
from cli_helper import run_cli


def _adopt(root: Path) -> dict:
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    return json.loads(done.stdout)


def _listed(root: Path) -> list[str]:
    data = tomllib.loads((root / "build.toml").read_text())
    listed = list(data["torch"]["src"])
    for kernel in data.get("kernel", {}).values():
        listed += kernel["src"]
    return listed


def test_the_tutorial_form_is_ported_to_the_kernels_namespace_with_the_schemas_as_written(tmp_path):
    root = write_library_project(tmp_path / "libmath")
    author = (root / "libmath/csrc/ops.cpp").read_text()
    report = _adopt(root)
    assert not [f for f in report["findings"] if f["code"] == "PA111"]
    assert {op["name"]: op["schema"] for op in report["ops"]} == {
        "muladd": "muladd(Tensor a, Tensor b, float c) -> Tensor",
        "add_out": "add_out(Tensor a, Tensor b, Tensor(a!) out) -> ()",
        "gather_rows": "gather_rows(Tensor x, Tensor index) -> Tensor"}
    ported = (root / "libmath/csrc/ops.cpp").read_text()
    assert "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, m) {" in ported
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, m) {" in ported
    assert '"libmath::' not in ported  # a name qualified by the old namespace would not be the kernel's
    # the author's own build still compiles their registration (the other branch of the guard)
    kept = library.unport(ported)
    assert "TORCH_LIBRARY(libmath, m) {" in kept and "TORCH_LIBRARY_IMPL(libmath, CPU, m) {" in kept
    assert kept.replace('"add_out', '"libmath::add_out') == author
    ops_py = (root / "torch-ext/libmath/ops.py").read_text()
    assert "torch.ops.libmath" not in ops_py and '"libmath::' not in ops_py
    assert "from ._ops import ops, add_op_namespace_prefix\n" in ops_py
    assert "return ops.muladd.default(a, b, c)" in ops_py
    assert '@torch.library.register_fake(add_op_namespace_prefix("muladd"))' in ops_py
    assert 'torch.library.register_autograd(add_op_namespace_prefix("muladd"), _backward' in ops_py
    ast.parse(ops_py)
    # the dummy module imported for its effect stays importable: importing it loads the kernel's library
    assert "from ._ops import ops" in (root / "torch-ext/libmath/_C.py").read_text()
    assert all((root / rel).is_file() for rel in _listed(root))
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output
    again = run_cli("adopt", str(root), "--json")
    assert json.loads(again.stdout)["written"] == []


def test_register_operators_become_fragments_with_schemas_from_the_signatures(tmp_path):
    root = write_operators_project(tmp_path / "segs")
    report = _adopt(root)
    schemas = {op["name"]: op["schema"] for op in report["ops"]}
    assert schemas == {"segment_sum": "segment_sum(Tensor src, Tensor indptr, int? size) -> Tensor",
                       "segment_count": "segment_count(Tensor indptr) -> Tensor",
                       "version": None}  # a lambda: torch infers its schema when it registers it, as before
    assert [f["code"] for f in report["findings"] if f["code"] == "PA172"] == ["PA172"]
    sums = (root / "csrc/sum.cpp").read_text()
    assert "TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, m) {" in sums
    # the alias analysis RegisterOperators gave (conservative: any argument may be written) is kept
    assert ('m.def(torch::schema("segment_sum(Tensor src, Tensor indptr, int? size) -> Tensor", '
            'c10::AliasAnalysisKind::CONSERVATIVE), &segment_sum);') in sums
    assert ('m.def(torch::schema("segment_count(Tensor indptr) -> Tensor", c10::AliasAnalysisKind::CONSERVATIVE), '
            '[](torch::Tensor indptr) {') in sums
    assert 'm.def("version", [] { return segs_version(); });' in (root / "csrc/version.cpp").read_text()
    init = (root / "torch-ext/segs/__init__.py").read_text()
    assert "torch.ops.load_library(" not in init and "find_spec" not in init
    assert "version = ops.version()" in init and "from . import _ops" in init
    assert "return ops.segment_sum(src, indptr, size)" in (root / "torch-ext/segs/sums.py").read_text()
    # one library per variant now: no module per former extension
    assert not (root / "torch-ext/segs/_sum_cpu.py").exists()
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output


def test_a_pybind11_module_and_a_torch_library_become_one_kernel(tmp_path):
    root = write_mixed_project(tmp_path / "mixed")
    report = _adopt(root)
    assert {op["name"]: op["registered_by"] for op in report["ops"]} == {"scale": "pybind11", "shift": "library"}
    defs = (root / "torch-ext/torch_binding.cpp").read_text()
    # the author's TORCH_LIBRARY is the namespace's one: the pybind11 ops join it as a fragment
    assert "TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, ops) {" in defs and 'ops.def("scale(' in defs
    assert 'ops.def("shift' not in defs and "REGISTER_EXTENSION(TORCH_EXTENSION_NAME)" in defs
    assert "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, m)" in (root / "csrc/lib.cpp").read_text()
    init = (root / "torch-ext/mixed/__init__.py").read_text()
    assert "return ops.shift(x, s)" in init and "return _C.scale(x, factor)" in init
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output


def test_a_refused_extension_never_leaves_a_build_toml_naming_a_file_nobody_wrote(tmp_path):
    root = write(tmp_path / "bare", {
        "setup.py": "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n"
                    "setup(name='bare', ext_modules=[CppExtension('bare_ext', ['bare.cpp'])])\n",
        "bare.cpp": "#include <torch/all.h>\ntorch::Tensor f(torch::Tensor x) { return x; }\n"})
    plan = make_plan(root)
    assert any(f.code == "PA111" for f in plan.findings)
    written = {c.path for c in plan.changes}
    toml = next((c.new for c in plan.changes if c.path == "build.toml"), None)
    if toml is not None:
        data = tomllib.loads(toml)
        listed = [*data["torch"]["src"], *(s for k in data.get("kernel", {}).values() for s in k["src"])]
        assert all(rel in written or (root / rel).is_file() for rel in listed), listed


def test_lookups_by_the_old_name_become_lookups_of_the_carried_module(tmp_path):
    root = write_lookup_project(tmp_path / "fastrelu")
    report = _adopt(root)
    assert not [f for f in report["findings"] if f["code"] == "PA121"]
    wrapper = (root / "torch-ext/fastrelu_ext/fastrelu.py").read_text()
    assert 'importlib.util.find_spec(".fastrelu_ext", __package__) is not None' in wrapper
    assert 'fastrelu_ext = importlib.import_module(".fastrelu_ext", __package__)' in wrapper
    assert "find_loader" not in wrapper and "load(name=" not in wrapper.replace("was load(name=", "")
    assert "    from . import fastrelu_ext as _again\n" in wrapper
    ast.parse(wrapper)


def test_the_projects_tests_in_test_and_beside_setup_py_call_the_kernels_namespace(tmp_path):
    # pytorch/extension-cpp keeps its test in test/ (opcheck(torch.ops.extension_cpp.mymuladd.default, ...));
    # other projects keep theirs beside setup.py: both are carried into tests/ and call the kernel's ops
    root = write_library_project(tmp_path / "libmath")
    test = ("import torch\nfrom torch.library import opcheck\n\nimport libmath\n\n\ndef test_{0}():\n"
            "    a, b = torch.randn(3), torch.randn(3)\n    opcheck(torch.ops.libmath.muladd.default, (a, b, 1.0))\n"
            "    torch.testing.assert_close(torch.ops.libmath.muladd(a, b, 1.0), a * b + 1.0)\n")
    write(root, {"test/test_ops.py": test.format("in_test"), "test_root.py": test.format("beside_setup")})
    changes = {c.path: c.new for c in make_plan(root).changes}
    for carried in ("tests/test_ops.py", "tests/test_root.py"):
        assert "torch.ops.libmath" not in changes[carried], changes[carried]
        assert "opcheck(libmath._ops.ops.muladd.default, (a, b, 1.0))" in changes[carried]
        assert "libmath._ops.ops.muladd(a, b, 1.0)" in changes[carried]
        ast.parse(changes[carried])
