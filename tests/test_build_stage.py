"""Atomic replacement of build/<variant>/ and the per-build-folder lock."""

import pytest

from publisher import state
from publisher.builder import atomic as stage
from publisher.errors import UsageError


def _variant(path, text):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metadata.json").write_text(text)
    return path


def test_promote_replaces_old_variant_in_one_step(tmp_path):
    build = tmp_path / "build"
    target = _variant(build / "torch-cpu", "old")
    new = _variant(stage.new_stage(build, "torch-cpu"), "new")
    stage.promote(new, target)
    assert (target / "metadata.json").read_text() == "new"
    assert not new.exists()
    assert list(state.staging_dir(build).iterdir()) == []
    assert oct(target.stat().st_mode & 0o777) == "0o755"


def test_promote_into_empty_build_folder(tmp_path):
    build = tmp_path / "build"
    new = _variant(stage.new_stage(build, "torch-cpu"), "new")
    stage.promote(new, build / "torch-cpu")
    assert (build / "torch-cpu" / "metadata.json").read_text() == "new"


def test_lock_clears_stale_staging_and_refuses_a_second_build(tmp_path):
    build = tmp_path / "build"
    stale = _variant(stage.new_stage(build, "torch-cpu"), "partial")
    with stage.build_lock(build):
        assert not stale.exists()
        with pytest.raises(UsageError, match="another `publisher build`"):
            with stage.build_lock(build):
                pass
