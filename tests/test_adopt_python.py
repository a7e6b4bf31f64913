"""The project's Python carried into the package (publisher/adopt/python.py):
imports of the extension and of the package itself made relative, load()
calls replaced by an import, what cannot be rewritten named at its line."""

from __future__ import annotations

import ast

from publisher.adopt.model import Op
from publisher.adopt.python import ImportContext, alias_module, generated_init, imports_package, rewrite, rewrite_tests
from publisher.adopt.types import parse

CTX = ImportContext(extensions={"fused_ssim_cuda": "fused_ssim_cuda", "pkg._C": "_C"}, package="pkg", depth=0)


def _rewrite(text, ctx=CTX, loads=None):
    new, findings = rewrite(text, "m.py", ctx, loads or {})
    ast.parse(new)  # still Python
    return new, findings


def test_imports_of_the_extension_module_become_relative():
    new, findings = _rewrite(
        "import fused_ssim_cuda\n"
        "import fused_ssim_cuda as F  # the kernels\n"
        "from fused_ssim_cuda import fusedssim, fusedssim_backward\n"
        "if True:\n"
        "    from fused_ssim_mps import fusedssim\n")
    assert new == ("from . import fused_ssim_cuda\n"
                   "from . import fused_ssim_cuda as F  # the kernels\n"
                   "from .fused_ssim_cuda import fusedssim, fusedssim_backward\n"
                   "if True:\n"
                   "    from fused_ssim_mps import fusedssim\n")  # another build's module: not ours to touch
    assert findings == []


def test_absolute_imports_of_the_package_become_relative_at_the_files_depth():
    text = "from pkg._C import op\nimport pkg._C as ext\nfrom pkg import helpers\nfrom pkg.sub import x\nimport os, pkg._C as c\n"
    new, _ = _rewrite(text, ImportContext(CTX.extensions, "pkg", depth=1))
    assert new == ("from .._C import op\nfrom .. import _C as ext\nfrom .. import helpers\nfrom ..sub import x\n"
                   "import os; from .. import _C as c\n")


def test_a_load_call_becomes_an_import_of_the_module_that_replaces_it():
    text = "from torch.utils.cpp_extension import load\next = load(name='mini_attn',\n  sources=['a.cpp'])\nx = 1\n"
    new, findings = _rewrite(text, loads={"mini_attn": "mini_attn"})
    assert "from . import mini_attn as ext  # publisher adopt: was load(name='mini_attn', ...)\n" in new
    assert "sources" not in new and new.endswith("x = 1\n") and findings == []


def test_the_agent_layout_module_named_ops_is_the_builds_ops():
    new, _ = _rewrite("try:\n    from . import _ops as ops\nexcept ImportError:\n    ops = None\n")
    assert "    from ._ops import ops\n" in new
    again, _ = _rewrite(new)
    assert again == new


def test_what_cannot_be_rewritten_is_named_with_its_line():
    text = ("import importlib\nimport torch\nimport pkg._C\n"
            "found = importlib.util.find_spec('fused_ssim_cuda')\n"
            "torch.library.custom_op('pkg::op', mutates_args=())\n"
            "y = torch.ops.pkg.op\n"
            "z = pkg._C.forward\n")
    new, findings = _rewrite(text)
    assert {(f.code, f.line) for f in findings} == {("PA183", 4), ("PA122", 5), ("PA122", 6)}
    # `pkg` is only ever `pkg._C...`: the exact rewrite binds `_C` relatively and each use names it
    assert "from . import _C\n" in new and "z = _C.forward\n" in new
    # the lookup by the old name is the carried module's, relative to the package
    assert 'found = importlib.util.find_spec(".fused_ssim_cuda", __package__)\n' in new


def test_an_import_of_a_submodule_for_its_effect_becomes_relative():
    # pointnet2_ops/__init__.py: `import pointnet2_ops.pointnet2_utils` and the name `pointnet2_ops` never used
    new, findings = _rewrite("import pkg.utils\nimport pkg._C\nfrom pkg._version import __version__\n")
    assert new == "from . import utils\nfrom . import _C\nfrom ._version import __version__\n" and not findings


def test_an_extension_built_through_a_function_of_the_module_becomes_an_import():
    # KNN_CUDA: `_knn = load_cpp_ext("knn")`, whose body calls load(name=ext_name, ...)
    text = ("def load_cpp_ext(name):\n    return load(name=name, sources=[name + '.cu'])\n\n"
            "_knn = load_cpp_ext('knn')\n\n\ndef knn(a, b, k):\n    return _knn.knn(a, b, k)\n")
    new, findings = rewrite(text, "knn_cuda/__init__.py", CTX, {"knn": "knn"}, {4: "knn"})
    assert "from . import knn as _knn  # publisher adopt: was built by load(name='knn', ...)\n" in new
    assert "return _knn.knn(a, b, k)" in new and not findings


def test_the_projects_tests_import_the_kernels_package_instead_of_the_extension():
    moved = {"causal_conv1d_cuda": "causal_conv1d.causal_conv1d_cuda", "old_pkg": "new_pkg",
             "old_pkg._C": "new_pkg._C"}
    text = ("import causal_conv1d_cuda\nimport causal_conv1d_cuda as cc\nfrom old_pkg.utils import f\n"
            "import old_pkg\nfrom causal_conv1d.interface import g\n")
    new = rewrite_tests(text, "tests/test_x.py", moved)
    assert new == ("from causal_conv1d import causal_conv1d_cuda\nfrom causal_conv1d import causal_conv1d_cuda as cc\n"
                   "from new_pkg.utils import f\nimport new_pkg as old_pkg\nfrom causal_conv1d.interface import g\n")
    assert imports_package(new, "causal_conv1d") and not imports_package("import torch\n", "causal_conv1d")


def test_the_module_replacing_the_extension_aliases_its_functions_to_the_ops():
    op = Op("forward", "forward", (), parse("torch::Tensor", is_return=True), "LLTM forward", "a.cpp", 3)
    text = alias_module("lltm_cpp", [op], depth=0)
    assert "from ._ops import ops\n" in text and "forward = ops.forward  # LLTM forward\n" in text
    ast.parse(text)


def test_a_generated_package_imports_carried_modules_only_when_used():
    text = generated_init("lltm_cpp", [("lltm_cpp", ["forward", "backward"])], ["lltm"], ["lltm_cpp"])
    namespace: dict = {}
    code = compile(text.replace("from .lltm_cpp import backward, forward", "backward = forward = None"), "x", "exec")
    exec(code, namespace)
    assert "lltm" not in namespace and namespace["__getattr__"] and '"lltm"' in text
    assert namespace["__all__"] == ["backward", "forward", "lltm"]


def test_an_extension_imported_only_under_a_condition_is_not_imported_on_every_load():
    from publisher.adopt.python import imports_module

    conditional = "import torch\nif torch.cuda.is_available():\n    from .fused_ssim_cuda import fusedssim\n"
    assert not imports_module(conditional, "fused_ssim_cuda")  # adopt then imports it at the end of __init__
    assert imports_module("from . import _C\n", "_C") and imports_module("from .sub._C import f\n", "sub._C")


def test_a_projects_test_calling_the_ops_by_their_namespace_calls_the_kernels():
    # pytorch/extension-cpp's test: opcheck(torch.ops.extension_cpp.mymuladd.default, args)
    text = ("import torch\nfrom torch.library import opcheck\nimport extension_cpp\n\n\ndef test_opcheck():\n"
            "    opcheck(torch.ops.extension_cpp.mymuladd.default, (torch.ones(2), torch.ones(2), 1.0))\n"
            "    torch.library.register_fake('extension_cpp::mymul')(lambda a, b: a)\n")
    new = rewrite_tests(text, "test/test_extension.py", {"extension_cpp": "extension_cpp"},
                        frozenset({"extension_cpp"}), "extension_cpp")
    assert "opcheck(extension_cpp._ops.ops.mymuladd.default," in new
    assert "torch.library.register_fake(extension_cpp._ops.add_op_namespace_prefix(\"mymul\"))" in new
    assert "import extension_cpp\nimport extension_cpp._ops\n" in new and "torch.ops.extension_cpp" not in new
    ast.parse(new)


def test_an_absolute_self_import_used_through_the_package_name_becomes_relative():
    # `import pkg.functions` then `pkg.functions.f(...)`: the relative import and `functions.f(...)` are exact
    text = ("import torch\nimport pkg.functions\nimport pkg.ops.inner\n\n\n"
            "def forward(x):\n    return pkg.functions.scale(x) + pkg.ops.inner.shift(x)\n")
    new, findings = _rewrite(text, ImportContext(CTX.extensions, "pkg", depth=1))
    assert not findings
    assert new == ("import torch\nfrom .. import functions\n"
                   "from .. import ops; from ..ops import inner as _inner  # noqa: F401  loads pkg.ops.inner\n\n\n"
                   "def forward(x):\n    return functions.scale(x) + ops.inner.shift(x)\n")


def test_a_self_import_whose_package_name_is_used_itself_stays_a_finding():
    # `pkg` passed around (or its submodule's name already taken in the file): no exact rewrite, the finding says so
    for text in ("import pkg.functions\nprint(pkg)\n",
                 "import pkg.functions\nfunctions = 1\ny = pkg.functions.f(functions)\n"):
        new, findings = _rewrite(text)
        assert [f.code for f in findings] == ["PA121"] and "import pkg.functions\n" in new, new
