"""The verdict rules (publisher/testing/verdict.py) on the records a run leaves
(events, smoke log), the declarations of test dependencies, the hiding of
accelerators from a cpu variant, and which matrix cell the running
interpreter serves for a build. Quick: no pytest subprocess, no build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from publisher.options import TestOptions
from publisher.plan.variants import Variant
from publisher.runner import RunResult
from publisher.testing import verdict
from publisher.testing.accelerators import hiding_for
from publisher.testing.report import EventSummary, TestCounts, read_events
from publisher.testing.smoke import read_smoke
from publisher.testing.test_depends import declared_test_depends, pyproject_test_depends
from publisher.toolchains.provision import serves
from publisher.toolchains.spec import ToolchainSpec

KERNEL = verdict.Kernel(frozenset({"rmsnorm", "_rmsnorm_cpu_abc"}), ("/build/torch215-cpu", "/tmp/t/import"))
ENV = verdict.Environment("/env/bin/python", "toolchain torch215-cpu", frozenset())


def _judge(run: RunResult, events: EventSummary, suite: str = verdict.PROJECT, smoke=None, env=ENV, tmp=None):
    return verdict.judge(run, events, suite=suite, accelerator=None, kernel=KERNEL, env=env,
                         tests=tmp or Path("/nonexistent"), options=TestOptions(), smoke=smoke)


def _events(failing: tuple[str, ...], *exceptions: dict, errors: int = 0, failed: int = 0) -> EventSummary:
    return EventSummary(TestCounts(failed=failed, errors=errors), None, failing, (), exceptions)


def _missing(node: str, module: str, file: str = "/tmp/t/tests/test_x.py") -> dict:
    return {"nodeid": node, "type": "ModuleNotFoundError", "module": module, "message": f"No module named '{module}'",
            "file": file, "line": 2}


RC2 = RunResult(("pytest",), 2, "")
RC1 = RunResult(("pytest",), 1, "")


def test_a_missing_test_dependency_is_an_error_of_the_environment_with_the_fix():
    outcome = _judge(RC2, _events(("tests/test_x.py",), _missing("tests/test_x.py", "torch_harmonics"), errors=1))
    assert outcome.status == "error"
    assert "module `torch_harmonics` is not installed" in outcome.reason
    # declaring it is the fix: publisher installs declared dependencies for the run
    assert outcome.fix.startswith('declare it: pyproject.toml `[dependency-groups] test = ["torch-harmonics"]`')


def test_in_the_users_own_interpreter_declaring_is_the_fix_too_with_the_pypi_name():
    mine = verdict.Environment("/venv/bin/python", "this interpreter", frozenset())
    outcome = _judge(RC2, _events(("t.py",), _missing("t.py", "cv2"), errors=1), env=mine)
    # publisher installs declared test dependencies into its overlay, never into the user's interpreter
    assert outcome.fix.startswith('declare it: pyproject.toml `[dependency-groups] test = ["opencv-python"]`')
    assert "-m pip install" not in outcome.fix


def test_a_module_of_the_kernel_itself_missing_is_the_kernels_failure():
    raised = {**_missing("t.py", "rmsnorm.layers"), "type": "ImportError"}
    assert _judge(RC2, _events(("t.py",), raised, errors=1)).status == "failed"
    # ... and so is a third-party module the kernel's own code imports (users meet it too)
    inside = _missing("t.py", "einops", file="/build/torch215-cpu/__init__.py")
    assert _judge(RC2, _events(("t.py",), inside, errors=1)).status == "failed"
    # ... also through a module the package's __init__ imports: loading the kernel had not finished
    through = {**_missing("t.py", "einops", file="/build/torch215-cpu/layers.py"),
               "files": ["/tmp/t/tests/t.py", "/build/torch215-cpu/__init__.py", "/build/torch215-cpu/layers.py"]}
    assert _judge(RC2, _events(("t.py",), through, errors=1)).status == "failed"
    # ... and a module of an installed package that this torch no longer has (torch._six)
    gone = _missing("t.py", "torch._six", file="/tmp/t/import/rmsnorm/utils/imports.py")
    assert _judge(RC2, _events(("t.py",), gone, errors=1)).status == "failed"


def test_a_kernel_submodule_needing_a_package_the_environment_lacks_is_an_error_with_the_kernels_fix():
    # maskrcnn-benchmark adopted: the kernel loads, but its config module imports yacs, which is not installed
    frames = ["/tmp/t/tests/test_detectors.py", "/tmp/t/import/rmsnorm/modeling/make_layers.py",
              "/tmp/t/import/rmsnorm/config/__init__.py", "/tmp/t/import/rmsnorm/config/defaults.py"]
    yacs = {**_missing("tests/test_detectors.py", "yacs", file=frames[-1]), "files": frames}
    outcome = _judge(RC2, _events(("tests/test_detectors.py",), yacs, errors=1))
    assert outcome.status == "error"
    assert "module `yacs` is not installed (the kernel's rmsnorm/config/defaults.py imports it)" in outcome.reason
    assert "importing the kernel is not what failed" in outcome.reason
    assert "not a dependency a Hub kernel can declare" in outcome.fix
    assert "/env/bin/python -m pip install yacs" in outcome.fix
    # a curated dependency is the kernel's to declare
    einops = {**_missing("tests/test_x.py", "einops", file=frames[-1]), "files": frames}
    outcome = _judge(RC2, _events(("tests/test_x.py",), einops, errors=1))
    assert outcome.status == "error" and "declare `einops` in build.toml `[general] python-depends`" in outcome.fix


def test_real_failures_beside_a_missing_module_fail_the_variant():
    events = _events(("a.py::test_a", "b.py::test_b"), _missing("a.py::test_a", "scipy"),
                     {"nodeid": "b.py::test_b", "type": "AssertionError", "message": "", "file": "/tmp/t/tests/b.py"},
                     failed=2)
    outcome = _judge(RC1, events)
    assert outcome.status == "failed" and "besides, 1 test(s) could not run: module `scipy`" in outcome.reason


def test_tests_that_do_not_compile_or_lack_a_fixture_are_errors():
    syntax = {"nodeid": "tests/test_x.py", "type": "SyntaxError", "message": "invalid syntax",
              "file": "/tmp/t/tests/test_x.py", "line": 4}
    outcome = _judge(RC2, _events(("tests/test_x.py",), syntax, errors=1))
    assert (outcome.status, outcome.fix) == ("error", "fix the syntax error at tests/test_x.py:4")
    fixture = {"nodeid": "t.py::test_a", "type": "FixtureLookupError", "message": "fixture 'gpu' not found"}
    outcome = _judge(RC1, _events(("t.py::test_a",), fixture, errors=1))
    assert outcome.status == "error" and "conftest.py" in outcome.fix


def test_a_conftest_that_cannot_import_is_an_error_naming_the_module():
    run = RunResult(("pytest",), 4, "ImportError while loading conftest\nModuleNotFoundError: No module named 'mpi4py'")
    outcome = _judge(run, _events(()))
    assert outcome.status == "error" and "`mpi4py`" in outcome.reason and "mpi4py" in outcome.fix


def _smoke(tmp_path: Path, *lines: dict):
    path = tmp_path / "smoke.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "call", "tar')  # cut short
    return read_smoke(path)


def test_smoke_log_names_the_call_a_crash_happened_in(tmp_path):
    smoke = _smoke(tmp_path,
                   {"event": "call", "target": "op a", "inputs": "Tensor[8, 256] float32 cpu"},
                   {"event": "outcome", "target": "op a", "outcome": "exercised", "inputs": "Tensor[8, 256] float32 cpu"},
                   {"event": "call", "target": "op b", "inputs": "Tensor[8, 256] bfloat16 cpu"},
                   {"event": "warning", "message": "op a: not torch.compile-ready: no fake"})
    assert smoke.unfinished.target == "op b" and [c.target for c in smoke.exercised] == ["op a"]
    crash = RunResult(("pytest",), -11, "Segmentation fault")
    outcome = _judge(crash, _events(()), suite=verdict.SMOKE, smoke=smoke)
    # on inputs publisher made, a crash is no verdict either way (the kernel may never be meant to get them)
    assert outcome.status == "untested", outcome
    assert "crashed (SIGSEGV) calling op b(Tensor[8, 256] bfloat16 cpu), on inputs publisher made" in outcome.reason
    assert outcome.fix.startswith("add tests/")
    assert smoke.warnings == ("op a: not torch.compile-ready: no fake",)


def test_a_smoke_test_that_exercised_nothing_is_untested(tmp_path):
    smoke = _smoke(tmp_path, {"event": "outcome", "target": "function quantize_", "outcome": "not-exercised",
                              "detail": "cannot be called: parameter `model` has no annotation"})
    ok = RunResult(("pytest",), 0, "")
    events = EventSummary(TestCounts(passed=4), None)
    outcome = _judge(ok, events, suite=verdict.SMOKE, smoke=smoke)
    assert outcome.status == "untested" and "`model` has no annotation" in outcome.reason


def test_a_call_that_broke_the_gpu_is_no_verdict_and_names_its_inputs(tmp_path):
    smoke = _smoke(tmp_path, {"event": "outcome", "target": "op gemm", "outcome": "fatal",
                              "inputs": "Tensor[8, 256] float32 cuda:0",
                              "detail": "AcceleratorError: CUDA error: an illegal memory access was encountered"})
    outcome = _judge(RC1, _events(("t::test_registered_ops_run",), failed=1), suite=verdict.SMOKE, smoke=smoke)
    assert outcome.status == "untested", outcome
    assert ("the smoke test left the accelerator unusable in op gemm(Tensor[8, 256] float32 cuda:0): AcceleratorError"
            in outcome.reason and "on inputs publisher made" in outcome.reason)


def test_exception_events_are_read_from_the_plugins_log(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(_missing("t.py", "x") | {"event": "exception"}) + "\n"
                   + json.dumps({"event": "collect-error", "nodeid": "t.py"}) + "\n[1, 2]\n")
    events = read_events(log)
    assert events.failing == ("t.py",) and events.exceptions[0]["module"] == "x"


# -- declarations ----------------------------------------------------------------------

def test_test_dependencies_come_from_pyproject_publisher_toml_and_flake(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[dependency-groups]\nBase = ["numpy"]\nTests = ["scipy>=1.11", {include-group = "base"}]\n')
    (tmp_path / "publisher.toml").write_text('test-depends = ["tabulate", "numpy"]\n')
    (tmp_path / "flake.nix").write_text("pythonCheckInputs = pkgs: with pkgs; [ einops ];\n")
    assert declared_test_depends(tmp_path) == ("scipy>=1.11", "numpy", "tabulate", "einops")


@pytest.mark.parametrize("text, problem", [
    ("[dependency-groups\n", "cannot be read"),
    ('[dependency-groups]\ntest = "numpy"\n', "must be a list"),
    ('[dependency-groups]\ntest = ["numpy>>1"]\n', "is not a requirement"),
    ('[dependency-groups]\ntest = [{include-group = "test"}]\n', "includes itself"),
    ('[dependency-groups]\ntest = [{include-group = "nope"}]\n', "names no group"),
    ('[dependency-groups]\ntest = [3]\n', "neither a requirement"),
], ids=["toml", "not-list", "bad-req", "cycle", "unknown-group", "not-str"])
def test_a_broken_test_group_is_a_located_finding(tmp_path, text, problem):
    (tmp_path / "pyproject.toml").write_text(text)
    found, findings = pyproject_test_depends(tmp_path)
    assert [f.code for f in findings] == ["PB410"] and problem in findings[0].message
    assert findings[0].file == str(tmp_path / "pyproject.toml")


# -- accelerators hidden from a cpu variant ---------------------------------------------

def test_a_cpu_variant_is_tested_with_the_platforms_accelerators_hidden():
    hiding = hiding_for(Variant.parse("torch215-cxx11-cpu-x86_64-linux"), "x86_64-linux")
    assert hiding.env["CUDA_VISIBLE_DEVICES"] == "" and hiding.env["HIP_VISIBLE_DEVICES"] == ""
    assert "CUDA" in hiding.hidden and "cuda" in hiding.torch_checks
    assert hiding_for(Variant.parse("torch-cpu"), "aarch64-darwin").hidden == ("MPS",)
    assert hiding_for(Variant.parse("torch215-cxx11-cu130-x86_64-linux"), "x86_64-linux") is None
    assert hiding_for(Variant.parse("torch-cuda"), "x86_64-linux") is None


# -- the running interpreter as a cell's toolchain ----------------------------------------

def _spec(compute: str, requirement: str, torch: str = "2.11") -> ToolchainSpec:
    return ToolchainSpec(torch, compute, "x86_64-linux", None, requirement)


@pytest.mark.parametrize("spec, info, expected", [
    (_spec("cu130", "torch==2.11.0"), {"torch_version": "2.11.0+cu130", "cuda": "13.0"}, True),
    (_spec("cu130", "torch==2.11.*"), {"torch_version": "2.11.0+cu130", "cuda": "13.0"}, True),
    (_spec("cu128", "torch==2.11.0"), {"torch_version": "2.11.0+cu130", "cuda": "13.0"}, False),
    (_spec("cu130", "torch==2.11.1"), {"torch_version": "2.11.0+cu130", "cuda": "13.0"}, False),
    (_spec("cpu", "torch==2.15.0+cpu", "2.15"), {"torch_version": "2.15.0+cpu", "cuda": None}, True),
    (_spec("cpu", "torch==2.11.*"), {"torch_version": "2.11.0+cu130", "cuda": "13.0"}, True),
    (_spec("cu130", "torch==2.11.0"), {"torch_version": "2.11.0+cpu", "cuda": None}, False),
    (_spec("cu130", "torch==2.11.0"), {}, False),
    (_spec("cpu", "not a requirement"), {"torch_version": "2.11.0"}, False),
], ids=["exact", "wildcard", "other-cuda", "other-patch", "cpu-local-label", "cpu-from-cuda-torch", "cpu-torch-for-cuda",
        "no-torch", "bad-requirement"])
def test_which_cells_the_running_interpreter_serves(spec, info, expected):
    assert serves(spec, info, "x86_64-linux") is expected
    assert serves(spec, info, "aarch64-linux") is False


def test_a_failing_test_marked_flaky_says_what_would_have_rerun_it():
    # kernels-community rotary marks its bf16 equivalence test @pytest.mark.flaky(max_runs=2, min_passes=1)
    events = EventSummary(TestCounts(passed=191, failed=1), None, ("t.py::test_rotary",),
                          flaky_unretried=("t.py::test_rotary",))
    outcome = _judge(RC1, events)
    assert outcome.status == "failed" and "marked @pytest.mark.flaky" in outcome.reason and "`flaky`" in outcome.reason


def _raised(node: str, kind: str, message: str, *files: str) -> dict:
    return {"nodeid": node, "type": kind, "message": message, "file": files[-1], "line": 4, "files": list(files)}


TORCH_INIT = "/venv/lib/python3.12/site-packages/torch/__init__.py"


def test_a_test_module_that_cannot_import_code_outside_the_kernel_is_an_error_not_a_failure():
    # maskrcnn-benchmark's tests import a helper that reads torch._six (gone from torch 2.x): no test ran,
    # and nothing raised in the kernel's code, so the kernel is not judged
    events = _events(("tests/test_configs.py", "tests/test_backbones.py"),
                     _raised("tests/test_configs.py", "AttributeError", "module 'torch' has no attribute '_six'",
                             "/tmp/t/tests/test_configs.py", "/tmp/t/tests/utils.py", TORCH_INIT),
                     _missing("tests/test_backbones.py", "yacs"), errors=2)
    outcome = _judge(RC2, events)
    assert outcome.status == "error"
    assert "tests/test_configs.py could not be collected: AttributeError" in outcome.reason
    assert "not in the kernel's code" in outcome.reason and "module `yacs` is not installed" in outcome.reason


def test_a_collection_error_raised_in_the_kernels_own_code_fails_it_and_the_reason_names_that_one():
    # the kernel's own package does not import on this torch: its users meet that too; the reason names that
    # error, not the missing test dependency beside it
    events = _events(("tests/test_backbones.py", "tests/test_configs.py"),
                     _missing("tests/test_backbones.py", "yacs"),
                     _raised("tests/test_configs.py", "AttributeError", "module 'torch' has no attribute '_six'",
                             "/tmp/t/tests/test_configs.py", "/tmp/t/import/rmsnorm/utils/imports.py", TORCH_INIT),
                     errors=2)
    outcome = _judge(RC2, events)
    assert outcome.status == "failed"
    assert outcome.reason.startswith("tests could not be collected: tests/test_configs.py (AttributeError: module "
                                     "'torch' has no attribute '_six' (raised in")
    assert "1 test(s) could not run: module `yacs` is not installed" in outcome.reason
