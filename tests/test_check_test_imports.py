"""PB409 reads what `pytest tests` runs: the test files it collects and the
modules of tests/ they import, not a script kept there (longcw/RoIAlign.pytorch's
tests/crop_and_resize_example.py, run as `python tests/...`, imports matplotlib
and skimage: no test of the kernel needs them)."""

from __future__ import annotations

from publisher.project.test_imports import check_test_imports

from adopt_fixtures import write


def test_undeclared_imports_of_collected_tests_and_their_helpers_are_named_not_those_of_scripts(tmp_path):
    root = write(tmp_path / "k", {
        "tests/test_rows.py": "import torch\nimport torch_harmonics\n\nimport helpers\n\n\ndef test_rows():\n"
                              "    assert helpers.ROWS and torch_harmonics\n",
        "tests/helpers.py": "import scipy\n\nROWS = 3\n",
        "tests/crop_and_resize_example.py": "import matplotlib.pyplot as plt\nimport skimage\n",
        "tests/test.py": "import tensorflow as tf\n\n\ndef test_roialign():\n    pass\n",
    })
    named = {f.message.split("`")[1] for f in check_test_imports(root, "k", [], ["cpu"]) if f.code == "PB409"}
    assert named == {"torch_harmonics", "scipy"}


def test_a_module_of_torch_that_needs_what_torch_does_not_install_is_named_with_what_it_needs(tmp_path):
    # PyTorch's extension tutorial tests import torch.testing._internal, which imports expecttest
    test = ("import torch\nfrom torch.testing._internal.common_utils import TestCase\n\n\n"
            "class TestOps(TestCase):\n    def test_add(self):\n        pass\n")
    root = write(tmp_path / "k", {"tests/test_ops.py": test})
    (found,) = [f for f in check_test_imports(root, "k", [], ["cpu"]) if f.code == "PB409"]
    assert "`torch.testing._internal.common_utils`, which imports `expecttest`" in found.message and found.line == 2
    assert 'test-depends = ["expecttest"]' in found.hint
    # declared: nothing to say
    (root / "publisher.toml").write_text('test-depends = ["expecttest"]\n')
    assert not [f for f in check_test_imports(root, "k", [], ["cpu"]) if f.code == "PB409"]
