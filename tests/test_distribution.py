"""publisher's pins come from its own package metadata (pyproject.toml states
each once), found by the `publisher` package even beside PyPI's unrelated
`publisher` distribution."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from publisher import distribution
from publisher.testing.environment import runner_packages

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _declared() -> list[str]:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    return tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]


def test_the_kernels_pin_is_pyprojects():
    pin = next(r for r in _declared() if r.startswith("kernels"))
    assert distribution.requirement("kernels").replace(" ", "") == pin.replace(" ", "")
    assert runner_packages()[0] == distribution.requirement("kernels")


def test_an_unrelated_publisher_distribution_is_not_ours(tmp_path, monkeypatch):
    info = tmp_path / "publisher-0.11.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: publisher\nVersion: 0.11\nRequires-Dist: requests\n")
    (info / "top_level.txt").write_text("publisher\n")
    (info / "RECORD").write_text("publisher/__init__.py,,\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    distribution.requirements.cache_clear()
    try:
        assert "requests" not in distribution.requirements()
        assert len(distribution.requirements()) == len([r for r in _declared()])
    finally:
        distribution.requirements.cache_clear()


def test_the_hub_clients_oldest_huggingface_hub_is_pyprojects():
    from publisher.push.hub_client import MIN_HUB

    assert f"huggingface_hub>={MIN_HUB}" in _declared()


def test_a_huggingface_hub_too_old_for_kernel_repos_is_named_with_the_fix(monkeypatch):
    import huggingface_hub

    from publisher.errors import EnvironmentProblem
    from publisher.push.hub_client import HubClient

    monkeypatch.setattr(huggingface_hub, "__version__", "1.33.0")  # what transformers 5 installs
    with pytest.raises(EnvironmentProblem) as refused:
        HubClient("http://127.0.0.1:9")
    assert "huggingface_hub 1.33.0 cannot write to kernel repos" in refused.value.message
    assert "pip install --upgrade 'huggingface_hub>=2.0'" in refused.value.hint


def test_the_top_level_matrix_is_the_package_default_one_file():
    from publisher.data import data_path

    top = Path(__file__).resolve().parents[1] / "matrix.yaml"
    assert top.is_symlink() and top.resolve() == data_path("matrix.yaml").resolve()
    assert not data_path("matrix.yaml").is_symlink()  # the wheel carries a real file
