"""Toolchains: the running interpreter as is (--local), cached environments,
and a clear reason when a toolchain cannot be obtained here."""

import importlib.metadata
import sys
from pathlib import Path

import pytest
import torch

from publisher.errors import ToolchainUnavailable
from publisher.toolchains.provision import cache_root, ensure_packages, ensure_toolchain
from publisher.toolchains.spec import ToolchainSpec

TORCH = ".".join(torch.__version__.split("+")[0].split(".")[:2])


def _spec(**kw) -> ToolchainSpec:
    base = dict(torch=TORCH, compute="cpu", platform="x86_64-linux", index_url=None,
                torch_requirement=f"torch=={torch.__version__}")
    base.update(kw)
    return ToolchainSpec(**base)


def test_local_interpreter_is_used_as_is():
    tc = ensure_toolchain(_spec(python=sys.executable))
    assert tc.env_dir is None and tc.python == sys.executable
    assert tc.torch_version == importlib.metadata.version("torch")
    assert (Path(tc.torch_dir) / "include" / "torch" / "library.h").is_file()
    assert Path(tc.python_include, "Python.h").is_file()
    assert tc.nvcc is None


def test_local_interpreter_with_other_torch_is_refused():
    with pytest.raises(ToolchainUnavailable, match="the variant needs torch 2.1$"):
        ensure_toolchain(_spec(torch="2.1", python=sys.executable))


def test_local_torch_cannot_build_another_cuda():
    other = "12.6" if torch.version.cuda == "13.0" else "13.0"
    with pytest.raises(ToolchainUnavailable, match=f"built for CUDA {torch.version.cuda or 'none'}, the variant needs CUDA {other}"):
        ensure_toolchain(_spec(compute="cu" + other.replace(".", ""), python=sys.executable))


@pytest.mark.parametrize(
    "spec, reason",
    [
        (dict(platform="aarch64-darwin"), "aarch64-darwin toolchains cannot run on this x86_64-linux host"),
        (dict(compute="rocm71"), "ROCm hipcc"),
        (dict(compute="xpu20253"), "oneAPI"),
    ],
)
def test_unobtainable_toolchains_say_why(spec, reason, tmp_path, monkeypatch):
    monkeypatch.setenv("PUBLISHER_CACHE_DIR", str(tmp_path))
    with pytest.raises(ToolchainUnavailable, match=reason):
        ensure_toolchain(_spec(**spec))
    assert not (tmp_path / "toolchains").exists() or not any((tmp_path / "toolchains").iterdir())


def test_cache_folder_follows_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("PUBLISHER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "publisher" / "toolchains"
    monkeypatch.setenv("PUBLISHER_CACHE_DIR", str(tmp_path / "own"))
    assert cache_root() == tmp_path / "own" / "toolchains"


def test_extra_packages_on_a_foreign_interpreter_are_checked_not_installed():
    tc = ensure_toolchain(_spec(python=sys.executable))
    ensure_packages(tc, ["torch", "ninja"])
    with pytest.raises(ToolchainUnavailable, match="lacks surely-not-a-package-xyz"):
        ensure_packages(tc, ["surely-not-a-package-xyz==1.0"])


@pytest.mark.slow
def test_uninstallable_torch_is_unavailable_and_leaves_no_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PUBLISHER_CACHE_DIR", str(tmp_path))
    with pytest.raises(ToolchainUnavailable, match="could not install"):
        ensure_toolchain(_spec(torch="2.12", torch_requirement="torch==0.0.1"))
    assert [p.name for p in (tmp_path / "toolchains").iterdir() if not p.name.endswith(".lock")] == []


def test_one_reader_for_toolchain_records(tmp_path, monkeypatch):
    # the build (recorded_identity) and the test stage (recorded_toolchains) read records the same way
    from dataclasses import replace

    from publisher.toolchains import provision

    monkeypatch.setenv("PUBLISHER_CACHE_DIR", str(tmp_path))
    fields = {f: "x" for f in provision.Toolchain.__dataclass_fields__}
    toolchain = provision.Toolchain(**{**fields, "key": "t1", "include_dirs": ("a",), "library_dirs": ("b",)})
    for key in ("t1", "t2"):
        (tmp_path / "toolchains" / key).mkdir(parents=True)
        provision._write_record(tmp_path / "toolchains" / key / "toolchain.json", replace(toolchain, key=key))
    old = tmp_path / "toolchains" / "t2" / "toolchain.json"
    old.write_text(old.read_text().replace(f'"format": {provision._FORMAT}', '"format": 0'))
    assert provision.recorded_toolchains() == [toolchain]
    assert provision.read_record(tmp_path / "toolchains" / "t1" / "toolchain.json") == toolchain
