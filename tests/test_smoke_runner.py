"""Pieces of the variant runner that need no build: which repo id the
project's tests load, and what the temporary test folder exposes."""

from __future__ import annotations

import os

from publisher.testing.run_variant import TestOptions, VariantUnderTest, _prepare, find_repo_id


def test_repo_id_named_by_the_tests(tmp_path):
    (tmp_path / "test_a.py").write_text('k = kernels.get_kernel("acme/relu", version=1)\n')
    (tmp_path / "test_b.py").write_text("k = get_kernel(\n    'acme/relu', revision='main')\n")
    assert find_repo_id(tmp_path) == "acme/relu"


def test_no_repo_id_when_the_tests_name_several(tmp_path):
    (tmp_path / "test_a.py").write_text('get_kernel("acme/relu", version=1)\nget_kernel("acme/gelu", version=1)\n')
    assert find_repo_id(tmp_path) is None
    assert find_repo_id(None) is None


def test_only_the_variant_under_test_is_visible(tmp_path):
    build = tmp_path / "project" / "build"
    for name in ("torch212-cxx11-cpu-x86_64-linux", "torch-cpu"):
        (build / name).mkdir(parents=True)
    tests = tmp_path / "project" / "tests"
    tests.mkdir()
    (tests / "test_k.py").write_text("def test_k(): pass\n")
    (tests / "__pycache__").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    target = VariantUnderTest("torch-cpu", build / "torch-cpu", "halve", tests, "halve-torch-ext")
    _prepare(work, target, TestOptions(test_timeout=42))
    assert os.listdir(work / "halve-torch-ext") == ["torch-cpu"]  # named as kernel-builder's extension output
    assert (work / "halve-torch-ext" / "torch-cpu").resolve() == (build / "torch-cpu").resolve()
    assert (work / "import" / "halve").resolve() == (build / "torch-cpu").resolve()
    assert sorted(os.listdir(work / "tests")) == ["test_k.py"]
    assert "timeout = 42" in (work / "pytest.ini").read_text()
    assert "kernels_ci" in (work / "conftest.py").read_text()


def test_kernels_ci_tests_are_selected_unless_all_tests(tmp_path):
    from publisher.testing.environment import TestEnvironment
    from publisher.testing.run_variant import _pytest_argv

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_k.py").write_text("@pytest.mark.kernels_ci\ndef test_k(): pass\n")
    target = VariantUnderTest("torch-cpu", tmp_path, "k", tmp_path / "tests", "k-torch-ext")
    env = TestEnvironment("python3", "here")
    assert "kernels_ci" in _pytest_argv(env, tmp_path, target, load_only=False, all_tests=False)
    assert "kernels_ci" not in _pytest_argv(env, tmp_path, target, load_only=False, all_tests=True)
