"""resources/runners.yaml: which GitHub runner builds each platform's variants."""

from __future__ import annotations

import pytest

from publisher.errors import UsageError
from publisher.runners import load_runners


def test_the_shipped_table_builds_every_platform_of_upstream_policy_natively():
    table = load_runners()
    assert table.build == {
        "x86_64-linux": ("ubuntu-latest", "docker"),
        "aarch64-linux": ("ubuntu-24.04-arm", "docker"),
        "aarch64-darwin": ("macos-14", "local"),
    }
    assert table.gpu_test == {"cuda": ("x86_64-linux",)}


def test_a_broken_table_is_an_error_naming_the_file_and_the_fix(tmp_path):
    bad = tmp_path / "runners.yaml"
    bad.write_text("schema: 1\nbuild:\n  x86_64-linux: {backend: docker}\n")
    with pytest.raises(UsageError) as err:
        load_runners(bad)
    assert str(bad) in err.value.message and "runs-on" in err.value.hint
