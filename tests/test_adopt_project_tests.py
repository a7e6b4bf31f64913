"""The project's own tests, wherever they live (tests/, test/, test modules
beside setup.py, unittest classes), are carried into tests/ by adopt with the
modules they import, and `publisher test` runs them: a verdict on the project's
own comparisons with a reference, not on adopt's generated ops-run tests."""

from __future__ import annotations

import json

import pytest

from publisher.adopt.plan import make_plan

from adopt_fixtures import write_index_project, write_index_project_with_tests
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix


def test_tests_beside_setup_py_and_in_test_are_carried_into_tests(tmp_path):
    plan = make_plan(write_index_project_with_tests(tmp_path / "index"))
    changes = {c.path: c for c in plan.changes}
    assert {"tests/test_index_ops.py", "tests/reference.py", "tests/test_magnitude.py", "tests/pairs.json"} \
        <= set(changes)
    # the demo script named test.py defines no test: not carried; the project has tests: none generated
    assert "tests/test_test.py" not in changes and "tests/test_index_ops_ops.py" not in changes
    assert changes["tests/test_index_ops.py"].new == (tmp_path / "index/test_index_ops.py").read_text()
    assert "carried from test_index_ops.py into tests/" in changes["tests/test_index_ops.py"].what
    (carried,) = [f for f in plan.findings if f.code == "PA191"]
    assert "test/test_magnitude.py" in carried.message and "test_index_ops.py" in carried.message
    # what the carried tests import besides torch and kernels is declared, for `publisher test` to install
    assert changes["publisher.toml"].new == 'test-depends = ["expecttest", "numpy"]\n'
    (declared,) = [f for f in plan.findings if f.code == "PA194"]
    assert "expecttest, numpy" in declared.message


def test_the_declared_test_dependencies_join_what_the_author_declared_and_a_rerun_adds_nothing(tmp_path):
    root = write_index_project_with_tests(tmp_path / "index")
    (root / "publisher.toml").write_text('# mine\nplatforms = ["x86_64-linux"]\ntest-depends = ["scipy"]\n')
    change = {c.path: c for c in make_plan(root).changes}["publisher.toml"]
    assert change.new == '# mine\nplatforms = ["x86_64-linux"]\ntest-depends = ["scipy", "expecttest", "numpy"]\n'
    (root / "publisher.toml").write_text(change.new)
    assert "publisher.toml" not in {c.path for c in make_plan(root).pending}


def test_a_tests_folder_pytest_collects_nothing_from_gets_the_generated_tests(tmp_path):
    # longcw/RoIAlign.pytorch: tests/test.py and tests/test2.py are scripts (`python tests/test.py`), one with a
    # `def test_...`; `pytest tests` collects neither, so they are no tests of the kernel: adopt writes its own
    root = write_index_project(tmp_path / "index")
    (root / "tests").mkdir()
    (root / "tests/test.py").write_text("import torch\nimport index_ops\n\n\ndef test_roialign(is_cuda=True):\n"
                                        "    print(index_ops.magnitude(torch.randn(4, 2)))\n\n\n"
                                        "if __name__ == '__main__':\n    test_roialign()\n")
    (root / "tests/example.py").write_text("import index_ops\n")
    plan = make_plan(root)
    changes = {c.path for c in plan.changes}
    assert "tests/test_index_ops_ops.py" in changes
    assert "tests/test.py" not in changes and not any(f.code == "PA121" for f in plan.findings)
    # a tests/ test pytest collects is the project's own: nothing generated beside it
    (root / "tests/test_rows.py").write_text("import torch\nimport index_ops\n\n\ndef test_rows():\n"
                                             "    assert index_ops.gather_rows(torch.ones(3, 2), "
                                             "torch.tensor([1])).shape == (1, 2)\n")
    assert "tests/test_index_ops_ops.py" not in {c.path for c in make_plan(root).changes}


@pytest.mark.slow
def test_publisher_test_runs_the_carried_tests_and_the_verdict_rests_on_them(tmp_path):
    root = write_index_project_with_tests(tmp_path / "index")
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    assert run_cli("adopt", str(root), "--force").returncode == 0
    assert run_cli("build", str(root), "--local", timeout=1200).returncode == 0
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    # the pytest function and the unittest class beside setup.py, and test/'s test reading its data file, on
    # torch's own TestCase: what it needs (expecttest, numpy) adopt declared and the test run installed
    assert variant["status"] == "passed" and variant["tests"]["passed"] == 3, variant
    assert variant["suite"] == "project" and "checks" not in variant


def test_a_wrapper_that_also_holds_a_unittest_class_is_carried_as_a_test_too(tmp_path):
    # graspnet-baseline's knn/knn_modules.py shape, with the TestCase its upstream (torchKNN) keeps there
    root = write_index_project(tmp_path / "index")
    (root / "knn_modules.py").write_text(
        "import unittest\n\nimport torch\nfrom index_ops import _C\n\n\ndef gather(src, index):\n"
        "    return _C.gather_rows(src, index.long())\n\n\nclass TestGather(unittest.TestCase):\n"
        "    def test_first_row(self):\n        src = torch.randn(4, 2)\n"
        "        torch.testing.assert_close(gather(src, torch.tensor([0])), src[:1])\n")
    changes = {c.path: c for c in make_plan(root).changes}
    assert "tests/test_knn_modules.py" in changes
    # carried as it is: its import of the package reaches the kernel (publisher test puts it first on the path)
    assert "from index_ops import _C" in changes["tests/test_knn_modules.py"].new


def test_a_binding_including_torch_extension_h_in_quotes_is_guarded(tmp_path):
    # KPConv.pytorch: `#include "torch/extension.h"` (check refused the port: PB407)
    root = write_index_project(tmp_path / "index")
    source = root / "csrc/index.cpp"
    source.write_text(source.read_text().replace("#include <torch/extension.h>", '#include "torch/extension.h"'))
    ported = next(c.new for c in make_plan(root).changes if c.path == "csrc/index.cpp")
    assert ported.index("#ifdef Py_LIMITED_API") < ported.index('#include "torch/extension.h"')
