"""Which CUDA toolkit folders a variant compiles against, per platform: the
headers under targets/ are named after the platform (sbsa-linux on aarch64
servers), so a native aarch64 build must not look in targets/x86_64-linux."""

from __future__ import annotations

from pathlib import Path

from publisher.builder.compile import cuda_include_dirs


def _toolkit(root: Path, *targets: str) -> Path:
    (root / "include").mkdir(parents=True)
    for target in targets:
        (root / "targets" / target / "include").mkdir(parents=True)
        (root / "targets" / target / "include" / "cuda_runtime.h").write_text("")
    return root


def test_aarch64_linux_compiles_against_the_sbsa_target(tmp_path):
    home = _toolkit(tmp_path / "cuda", "sbsa-linux")
    assert cuda_include_dirs(str(home), "aarch64-linux") == [
        str(home / "include"), str(home / "targets" / "sbsa-linux" / "include")]


def test_jetson_style_toolkit_is_found_too_and_each_platform_gets_only_its_own(tmp_path):
    home = _toolkit(tmp_path / "cuda", "aarch64-linux", "x86_64-linux")
    assert cuda_include_dirs(str(home), "aarch64-linux")[1:] == [str(home / "targets" / "aarch64-linux" / "include")]
    assert cuda_include_dirs(str(home), "x86_64-linux")[1:] == [str(home / "targets" / "x86_64-linux" / "include")]
