"""Verdicts a kernel author can trust (the real `publisher test`: real pytest
in a subprocess, the real `kernels` client). Each case is shaped like a real
project that got a false "failed" before:

- a cpu variant tested where an accelerator is visible: its tests must see none;
- a project without tests/ whose package exports `quantize_(model)`: the smoke
  test calls only what the signatures admit, and what raises on its guesses is
  "not exercised", never a failure;
- tests importing a module nobody declared: `error` with the fix, not `failed`;
- a build for a matrix cell the running interpreter satisfies: no environment made.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from publisher.push.card import describe_test

from cli_helper import run_cli
from matrix_fixtures import local_variant_name, write_local_matrix
from smoke_fixtures import write_files

pytestmark = pytest.mark.slow

NOARCH_BUILD = ('[general]\nname = "{name}"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
                'backends = ["cpu"]\n\n[torch-noarch]\n')

# A Python-only kernel shaped like agent-written quantization packages: a module-level
# `quantize_(model)` that walks the model, ops registered under the build's namespace (one
# that checks its input's shape, one whose size argument nobody can guess), and no tests/.
QUANT_INIT = '''\
import torch

from ._ops import add_op_namespace_prefix, ops

__all__ = ["quantize_", "fake_quant", "pack_rows", "row_scale"]


@torch.library.custom_op(add_op_namespace_prefix("fake_quant"), mutates_args=())
def _fake_quant(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.round(x / scale) * scale


@torch.library.custom_op(add_op_namespace_prefix("row_scale"), mutates_args=())
def _row_scale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    torch._check(scale.dim() == 1 and scale.shape[0] == x.shape[0], lambda: "scale must be 1-D, one per row")
    return x * scale[:, None]


@torch.library.custom_op(add_op_namespace_prefix("pack_rows"), mutates_args=())
def _pack_rows(x: torch.Tensor, bits: int) -> torch.Tensor:
    return x[:, : x.shape[1] * bits // 8].clone()


def fake_quant(x: torch.Tensor, scale: float = 0.05) -> torch.Tensor:
    return ops.fake_quant(x, scale)


def row_scale(x, scale):
    return ops.row_scale(x, scale)


def pack_rows(x, bits):
    return ops.pack_rows(x, bits)


def quantize_(model):
    """Quantize every linear layer of `model` in place."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.data = fake_quant(module.weight.data)
'''

SPIN_INIT = '''\
import torch

from ._ops import add_op_namespace_prefix, ops


@torch.library.custom_op(add_op_namespace_prefix("wait_for_peer"), mutates_args=())
def _wait_for_peer(x: torch.Tensor) -> torch.Tensor:
    while True:  # a communication kernel waiting for a peer that guessed inputs never bring
        pass


@torch.library.custom_op(add_op_namespace_prefix("halve"), mutates_args=())
def _halve(x: torch.Tensor) -> torch.Tensor:
    return x / 2
'''

ONLY_MODELS_INIT = '''\
import torch

from ._ops import add_op_namespace_prefix, ops


@torch.library.custom_op(add_op_namespace_prefix("gather_rows"), mutates_args=())
def _gather_rows(x: torch.Tensor, index: int) -> torch.Tensor:
    return x[index].clone()


def quantize_(model):
    for module in model.modules():
        pass
'''


def _noarch(root: Path, name: str, init: str, **files: str) -> Path:
    write_files(root, {"build.toml": NOARCH_BUILD.format(name=name), f"torch-ext/{name}/__init__.py": init, **files})
    built = run_cli("build", str(root), "--local")
    assert built.returncode == 0, built.stdout + built.stderr
    return root


def _test(project: Path, *args: str, env: dict | None = None) -> tuple[int, dict]:
    result = run_cli("test", str(project), "--json", *args, env=env)
    assert "Traceback" not in result.stderr, result.stderr
    (entry,) = json.loads(result.stdout)["variants"].values()
    return result.returncode, entry


def _calls(entry: dict) -> dict[str, dict]:
    return {c["target"]: c for c in entry["smoke"]}


# -- a cpu variant never sees the accelerator -------------------------------------

DEVICE_TEST = '''\
import json
import os
import sys

import torch
from kernels import get_kernel


def test_halve_on_the_device_users_of_this_variant_have():
    device = "cuda" if torch.cuda.is_available() else "cpu"  # as real projects pick it
    k = get_kernel("publisher-test/halve", version=1)
    x = torch.ones(4, device=device)
    assert torch.equal(k.halve(x), torch.full((4,), 0.5, device=device))
    with open(os.environ["SEEN"], "w") as fh:
        json.dump({"device": device, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}, fh)
'''

HALVE_INIT = '''\
import torch

from ._ops import add_op_namespace_prefix, ops


@torch.library.custom_op(add_op_namespace_prefix("halve"), mutates_args=())
def _halve(x: torch.Tensor) -> torch.Tensor:
    return x / 2


def halve(x: torch.Tensor) -> torch.Tensor:
    return ops.halve(x)
'''


def test_a_cpu_variant_is_tested_with_the_accelerators_hidden(tmp_path):
    """On a machine whose torch sees a GPU, the cpu variant's tests must pick the CPU (this machine has
    none: a sitecustomize makes torch report one, as a CUDA machine's torch does)."""
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **{"tests/test_halve.py": DEVICE_TEST})
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import torch\ntorch.cuda.is_available = lambda: True  # a GPU is here\n")
    seen = tmp_path / "seen.json"
    env = dict(os.environ, SEEN=str(seen), PYTHONPATH=str(site))
    rc, entry = _test(project, env=env)
    assert (rc, entry["status"]) == (0, "passed"), entry
    assert json.loads(seen.read_text()) == {"device": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    # the report says what the tests saw
    assert "CUDA" in entry["device"]["hidden"] and entry["device"]["gpu"] is None


# -- the smoke test is never the cause of a failure ---------------------------------

def test_the_smoke_test_calls_only_what_signatures_admit(tmp_path):
    project = _noarch(tmp_path / "quant", "quant", QUANT_INIT)
    rc, entry = _test(project)
    assert (rc, entry["status"], entry["suite"]) == (0, "passed", "smoke"), entry
    calls = _calls(entry)
    # called as its schema says, on tensors it builds: exercised, with the inputs shown
    assert calls["op fake_quant"]["outcome"] == "exercised"
    assert calls["op fake_quant"]["inputs"] == "Tensor[8, 256] float32 cpu, 1e-05"
    # a shape check raising on guessed inputs: not exercised, never a failure
    assert calls["op row_scale"]["outcome"] == "not-exercised"
    assert "scale must be 1-D" in calls["op row_scale"]["detail"]
    # a size nobody can guess: not called at all
    assert calls["op pack_rows"]["outcome"] == "not-exercised" and "bits: int" in calls["op pack_rows"]["detail"]
    # `quantize_(model)`: no annotation says what `model` is, so it is not called with a tensor
    assert calls["function quantize_"]["outcome"] == "not-exercised"
    assert "`model` has no annotation" in calls["function quantize_"]["detail"]
    assert calls["function fake_quant"]["outcome"] == "exercised"
    # no fake implementation: a warning, never a failure
    assert any("not torch.compile-ready" in w and "fake" in w for w in entry["warnings"]), entry["warnings"]
    # the card says the verdict rests on a smoke test
    assert "smoke test only" in describe_test(entry) and "no tests" in describe_test(entry)


def test_a_call_that_does_not_return_is_not_exercised_and_the_rest_is_judged(tmp_path):
    project = _noarch(tmp_path / "spin", "spin", SPIN_INIT)
    # 15 s for one smoke call: the run also starts Python, imports torch and loads the kernel within the
    # test timeout, which took over 5 s on a busy 2-core machine
    rc, entry = _test(project, "--test-timeout", "30")
    assert (rc, entry["status"]) == (0, "passed"), entry
    calls = _calls(entry)
    assert calls["op wait_for_peer"]["outcome"] == "not-exercised"
    assert calls["op wait_for_peer"]["detail"].startswith("did not return within 15 s")
    assert calls["op halve"]["outcome"] == "exercised"


# modules of a kernel named like standard-library and installed modules (a real extension package ships a
# typing.py; kernels-community scattermoe keeps its Triton code in a subpackage `kernels`)
SHADOWING_FILES = {
    "torch-ext/moe/typing.py": "from typing import Any  # the standard library's, from inside the package\n"
                               "TensorLike = Any\n",
    "torch-ext/moe/types.py": "raise RuntimeError('the kernel\'s types.py was imported as `types`')\n",
    "torch-ext/moe/io.py": "raise RuntimeError('the kernel\'s io.py was imported as `io`')\n",
    "torch-ext/moe/kernels/__init__.py": "from . import ops  # noqa: F401\n",
    "torch-ext/moe/kernels/ops.py": "from .._ops import add_op_namespace_prefix  # noqa: F401\n",
}
SHADOWING_INIT = HALVE_INIT.replace(
    "from ._ops import", "from . import kernels as _triton_code  # noqa: F401\nfrom .typing import TensorLike  # noqa: F401\n"
    "from ._ops import")
SHADOWING_TEST = """\
import typing

import torch

import moe
from kernels import get_local_kernel


def test_halve_through_the_package():
    assert typing.Any is not None and moe.typing.TensorLike is typing.Any
    torch.testing.assert_close(moe.halve(torch.ones(4)), torch.full((4,), 0.5))


def test_the_client_loads_the_variant():
    import os
    from pathlib import Path

    kernel = get_local_kernel(Path(os.environ["PUBLISHER_TEST_KERNEL_DIR"]))
    torch.testing.assert_close(kernel.halve(torch.ones(2)), torch.full((2,), 0.5))
"""


@pytest.mark.parametrize("tests", [False, True], ids=["smoke-test", "project-tests"])
def test_a_kernel_module_named_like_a_standard_or_installed_module_shadows_nothing(tmp_path, tests):
    """The variant is importable under its package name only: its typing.py, types.py, io.py and `kernels`
    subpackage never stand in for the standard library or the client, in the tests, the probe or the smoke test."""
    extra = {"tests/test_moe.py": SHADOWING_TEST} if tests else {}
    project = _noarch(tmp_path / "moe", "moe", SHADOWING_INIT, **SHADOWING_FILES, **extra)
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (0, "passed"), entry
    if tests:
        assert entry["tests"]["passed"] == 2 and entry["suite"] == "project", entry
    else:
        assert _calls(entry)["op halve"]["outcome"] == "exercised"


CUDA_ONLY_TEST = """\
import torch

import halve


def test_halve_on_cuda():
    x = torch.ones(4, device="cuda")
    assert torch.equal(halve.halve(x), torch.full((4,), 0.5, device="cuda"))
"""
CPU_TEST = """\
import torch

import halve


def test_halve_on_the_cpu():
    assert torch.equal(halve.halve(torch.ones(4)), torch.full((4,), 0.5))
"""


def test_tests_that_ask_for_the_hidden_accelerator_do_not_fail_a_cpu_variant(tmp_path):
    """kernels-community activation: its tests ask for CUDA, which a cpu variant's tests do not see; on the GPU
    machine the cpu variant was `failed` ("No CUDA GPUs are available") though they never called its kernel."""
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **{"tests/test_cuda.py": CUDA_ONLY_TEST})
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "untested"), entry
    assert "ask for CUDA" in entry["reason"] and "nothing judged the cpu variant" in entry["reason"]
    assert "torch.cuda.is_available()" in entry["fix"]
    # beside a test that judges it, the variant passes on that one, and the report says what did not run
    (project / "tests/test_cpu.py").write_text(CPU_TEST)
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (0, "passed"), entry
    assert entry["tests"]["passed"] == 1
    assert any("ask for CUDA" in w for w in entry["warnings"]), entry["warnings"]
    # a real failure beside them still fails it
    (project / "tests/test_cpu.py").write_text(CPU_TEST.replace("0.5", "0.25"))
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "failed"), entry


def test_a_smoke_test_that_could_call_nothing_is_untested_not_passed(tmp_path):
    project = _noarch(tmp_path / "models", "models", ONLY_MODELS_INIT)
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "untested"), entry
    assert "could call none" in entry["reason"] and "index: int" in entry["reason"]
    assert entry["fix"].startswith("add tests/")


def test_a_segfault_in_a_smoke_call_is_no_verdict_and_names_the_call_and_its_inputs(broken_project, tmp_path):
    """A crash on inputs publisher made is never `failed` (a kernel that trusts its inputs crashes on wrong
    ones), and never `passed`: untested, the call named, push refuses it as such."""
    from smoke_fixtures import write_broken

    bare = write_broken(tmp_path / "broken", tests=False)
    result = run_cli("test", str(bare), "--build-dir", str(broken_project / "build"), "--json",
                     "--variant", "torch*-cpu-*")
    assert result.returncode == 1, result.stderr
    (entry,) = json.loads(result.stdout)["variants"].values()
    assert entry["status"] == "untested"
    # the package's own call of it (`ops.crash(x)` in __init__.py) gave the inputs
    assert entry["reason"].startswith("no tests of its own, and the smoke test crashed (SIGSEGV) calling "
                                      "op crash(Tensor[8, 64] float32 cpu), on inputs publisher made"), entry["reason"]
    assert _calls(entry)["op crash"]["outcome"] == "unfinished"


# -- a test environment's shortfall is an error, with the fix --------------------------

IMPORTS_HARMONICS = '''\
import torch
import torch_harmonics

from kernels import get_kernel


def test_halve():
    k = get_kernel("publisher-test/halve", version=1)
    assert torch.equal(k.halve(torch.ones(2)), torch.full((2,), 0.5)) and torch_harmonics
'''


def test_an_undeclared_test_import_is_an_error_with_the_fix_not_a_failure(tmp_path):
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **{"tests/test_halve.py": IMPORTS_HARMONICS})
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "error"), entry
    assert "module `torch_harmonics` is not installed" in entry["reason"]
    assert "nothing of the kernel was judged" in entry["reason"]
    assert "-m pip install" not in entry["fix"]  # declaring it is the fix: publisher installs it for the run
    assert '[dependency-groups] test = ["torch-harmonics"]' in entry["fix"] and "publisher.toml" in entry["fix"]
    # `check` said so before any build
    checked = run_cli("check", str(project))
    assert "PB409" in checked.stdout and "torch_harmonics" in checked.stdout


def test_an_error_blocks_the_push_like_untested_and_allow_untested_admits_it(tmp_path, hub):
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **{"tests/test_halve.py": IMPORTS_HARMONICS})
    _test(project)
    env = hub.env()
    refused = run_cli("push", f"org-{tmp_path.name[-6:]}/halve", str(project), "--dry-run", env=env)
    assert refused.returncode != 0 and "PP104" in refused.output and "PP106" not in refused.output
    admitted = run_cli("push", f"org-{tmp_path.name[-6:]}/halve", str(project), "--dry-run", "--allow-untested", env=env)
    assert admitted.returncode == 0, admitted.output


def test_a_missing_name_of_the_kernel_itself_is_the_kernels_failure(tmp_path):
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **{
        "tests/test_halve.py": "from halve import double\n\n\ndef test_double():\n    assert double\n"})
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "failed"), entry
    assert "cannot import name 'double' from 'halve'" in entry["reason"]


def test_tests_that_do_not_compile_are_an_error_naming_the_line(tmp_path):
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT,
                      **{"tests/test_halve.py": "import torch\n\n\ndef test_halve(:\n    pass\n"})
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "error"), entry
    assert "tests/test_halve.py:4" in entry["fix"]


IMPORTS_EXPECTTEST = '''\
import expecttest
import termcolor
import torch

from kernels import get_kernel


def test_halve():
    k = get_kernel("publisher-test/halve", version=1)
    assert torch.equal(k.halve(torch.ones(2)), torch.full((2,), 0.5)) and expecttest and termcolor
'''


def _importable(module: str) -> bool:
    import subprocess

    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is not None)"
    return subprocess.run([sys.executable, "-c", probe]).returncode == 1


def test_declared_test_dependencies_are_installed_for_the_run_and_the_interpreter_is_untouched(tmp_path):
    """pyproject.toml (PEP 735) and publisher.toml declare what the tests need; the running interpreter lacks it:
    publisher installs it into an overlay of its own, reused by the next run, and the interpreter never sees it.
    Offline, the error names what is missing."""
    assert not _importable("expecttest") and not _importable("termcolor"), "the test needs them absent"
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **{
        "tests/test_halve.py": IMPORTS_EXPECTTEST,
        "pyproject.toml": '[dependency-groups]\nbase = ["termcolor"]\ntest = ["expecttest>=0.1", '
                          '{include-group = "base"}]\n',
        "publisher.toml": 'test-depends = ["pyyaml"]\n'})
    checked = run_cli("check", str(project))
    assert checked.returncode == 0 and "PB409" not in checked.stdout, checked.stdout
    cache = tmp_path / "cache"
    env = dict(os.environ, PUBLISHER_CACHE_DIR=str(cache))
    rc, entry = _test(project, env=env)
    assert (rc, entry["status"]) == (0, "passed"), entry
    assert entry["tests"]["passed"] == 1
    (overlay,) = (cache / "test-overlays").glob("[!.]*[!k]")  # the folder, not its lock
    assert {p.name.split("-")[0] for p in overlay.glob("*.dist-info")} == {"expecttest", "termcolor"}
    assert not _importable("expecttest") and not _importable("termcolor")  # the interpreter is untouched
    made = overlay.stat().st_mtime_ns
    rc, entry = _test(project, env=dict(env, UV_OFFLINE="1", PIP_NO_INDEX="1"))  # reused: nothing to fetch
    assert (rc, entry["status"]) == (0, "passed"), entry
    assert overlay.stat().st_mtime_ns == made
    # nothing reachable and nothing made yet: an error naming what is missing, never a failure of the kernel
    offline = dict(os.environ, PUBLISHER_CACHE_DIR=str(tmp_path / "empty"), UV_OFFLINE="1", PIP_NO_INDEX="1",
                   UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    rc, entry = _test(project, env=offline)
    assert (rc, entry["status"]) == (1, "error"), entry
    assert "expecttest>=0.1, termcolor" in entry["reason"] and "publisher's test overlay" in entry["reason"]
    assert "-m pip install 'expecttest>=0.1' 'termcolor'" in entry["fix"]


TWO_MODULES = {
    "tests/test_halve.py": '''\
import torch

import halve


def test_halve():
    assert torch.equal(halve.halve(torch.ones(2)), torch.full((2,), 0.5))


def test_halve_twice():
    assert torch.equal(halve.halve(halve.halve(torch.ones(2))), torch.full((2,), 0.25))
''',
    "tests/test_harmonics.py": "import torch_harmonics\n\n\ndef test_uses_it():\n    assert torch_harmonics\n",
}


def test_a_module_that_cannot_be_collected_is_its_own_line_and_the_others_still_run(tmp_path):
    project = _noarch(tmp_path / "halve", "halve", HALVE_INIT, **TWO_MODULES)
    result = run_cli("test", str(project))
    assert result.returncode == 1
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "error"), entry
    assert entry["tests"]["passed"] == 2, entry  # the module that could run did
    assert "the other 2 test(s) passed" in entry["reason"]
    (module,) = entry["modules"]
    assert module["module"] == "tests/test_harmonics.py" and module["status"] == "error"
    assert "torch_harmonics" in module["reason"] and module["fix"].startswith("declare it")
    assert "tests/test_harmonics.py: error: module `torch_harmonics` is not installed" in result.stdout
    # a real failure elsewhere still makes the variant fail
    wrong = TWO_MODULES["tests/test_halve.py"].replace("0.25", "0.3")
    (project / "tests/test_halve.py").write_text(wrong)
    rc, entry = _test(project)
    assert (rc, entry["status"]) == (1, "failed"), entry
    assert entry["tests"]["passed"] == 1 and entry["tests"]["failed"] == 1
    assert entry["modules"][0]["module"] == "tests/test_harmonics.py"


# -- a cell the running interpreter satisfies is built with it ---------------------------

CPU_KERNEL = {
    "build.toml": '[general]\nname = "twice"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n'
                  '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n\n'
                  '[kernel.twice_cpu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["twice_cpu/twice.cpp"]\n',
    "torch-ext/torch_binding.cpp": '#include <torch/library.h>\n\n#include "registration.h"\n\n'
                                   'at::Tensor twice(const at::Tensor& x);\n\n'
                                   'TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n'
                                   '  ops.def("twice(Tensor x) -> Tensor");\n}\n\n'
                                   'TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {\n'
                                   '  ops.impl("twice", &twice);\n}\n\n'
                                   'REGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n',
    "twice_cpu/twice.cpp": "#include <torch/all.h>\n\nat::Tensor twice(const at::Tensor& x) { return x * 2; }\n",
    "torch-ext/twice/__init__.py": "from ._ops import ops\n\n\ndef twice(x):\n    return ops.twice(x)\n",
}


def test_a_cell_the_running_interpreter_satisfies_is_built_with_it_offline(tmp_path):
    """The matrix names exactly this interpreter's torch, from an index nobody can reach:
    nothing is made or downloaded."""
    project = write_files(tmp_path / "twice", CPU_KERNEL)
    matrix = write_local_matrix(tmp_path / "matrix.yaml")
    text = matrix.read_text().replace("schema: 1\n", "schema: 1\nindexes:\n  nowhere: http://127.0.0.1:9/simple\n")
    matrix.write_text(text.replace("platforms:", "source: nowhere, platforms:"))
    cache = tmp_path / "cache"
    env = dict(os.environ, PUBLISHER_CACHE_DIR=str(cache))
    result = run_cli("build", str(project), "--matrix", str(matrix), "--json", "--no-hub-cache", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["variants"]
    assert (row["variant"], row["state"]) == (local_variant_name(), "built")
    log = Path(row["log"]).read_text()
    assert "using this interpreter's torch" in log and sys.executable in log
    assert not (cache / "toolchains").exists() or not any((cache / "toolchains").iterdir())
