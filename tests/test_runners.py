"""resources/runners.yaml: which GitHub runner builds each platform's variants."""

from __future__ import annotations

import pytest

from publisher.errors import UsageError
from publisher.plan.github_runners import load_runners


def test_the_shipped_table_builds_every_platform_of_upstream_policy_natively():
    table = load_runners()
    assert table.build == {
        "x86_64-linux": ("ubuntu-latest", "docker"),
        "aarch64-linux": ("ubuntu-24.04-arm", "docker"),
        "aarch64-darwin": ("macos-14", "local"),
    }
    # Where each accelerator's variants are tested: the GPU runner has x86_64 CUDA only; no runner has
    # ROCm, XPU, Metal or an aarch64 GPU, so those get a load check only.
    assert table.where_tested("cuda", "x86_64-linux") == "gpu-runner"
    for backend, platform in [("cuda", "aarch64-linux"), ("rocm", "x86_64-linux"), ("xpu", "x86_64-linux"),
                              ("metal", "aarch64-darwin")]:
        assert table.where_tested(backend, platform) == "none", (backend, platform)
    assert {table.where_tested("cpu", p) for p in table.build} == {"here"}


def test_a_cell_the_table_does_not_name_is_tested_where_built(tmp_path):
    path = tmp_path / "runners.yaml"
    path.write_text("schema: 1\nbuild:\n  x86_64-linux: {runs-on: ubuntu-latest, backend: docker}\n"
                    "test:\n  cuda: {x86_64-linux: none}\n")
    table = load_runners(path)
    assert table.where_tested("cuda", "x86_64-linux") == "none"
    # A new accelerator is tested (and fails without its hardware), never published untested by default.
    assert table.where_tested("npu", "x86_64-linux") == "here"
    assert table.where_tested("cuda", "aarch64-linux") == "here"


def test_an_unknown_test_place_is_an_error_naming_it(tmp_path):
    path = tmp_path / "runners.yaml"
    path.write_text("schema: 1\nbuild:\n  x86_64-linux: {runs-on: ubuntu-latest, backend: docker}\n"
                    "test:\n  rocm: {x86_64-linux: nowhere}\n")
    with pytest.raises(UsageError) as err:
        load_runners(path)
    assert str(path) in err.value.message and "test.rocm.x86_64-linux: 'nowhere'" in err.value.message
    assert "here, gpu-runner, none" in err.value.message


def test_a_broken_table_is_an_error_naming_the_file_and_the_fix(tmp_path):
    bad = tmp_path / "runners.yaml"
    bad.write_text("schema: 1\nbuild:\n  x86_64-linux: {backend: docker}\n")
    with pytest.raises(UsageError) as err:
        load_runners(bad)
    assert str(bad) in err.value.message and "runs-on" in err.value.hint
