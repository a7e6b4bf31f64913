"""Compiler flags derived from build.toml and the plan."""

import pytest

from publisher.builder.flags import defines, gencode_flags, ops_define, stable_abi_define


def test_gencode_per_capability_with_ptx_and_suffixes():
    assert gencode_flags(("8.0", "9.0a", "10.0f", "12.1+PTX")) == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-gencode=arch=compute_100f,code=sm_100f",
        "-gencode=arch=compute_121,code=sm_121",
        "-gencode=arch=compute_121,code=compute_121",
    ]


def test_gencode_rejects_garbage():
    with pytest.raises(ValueError, match="not a CUDA capability"):
        gencode_flags(("sm_80",))


def test_stable_abi_target_version_matches_torch_encoding():
    # torch: TORCH_TARGET_VERSION = (major << 56) | (minor << 48)
    assert stable_abi_define("2.10") == "-DTORCH_TARGET_VERSION=0x20a000000000000"


def test_defines_name_the_backend_and_limited_api_and_the_ops_id_apart():
    flags = defines("cuda", None)
    assert ops_define("_relu_cuda_abc1234") == "-DTORCH_EXTENSION_NAME=_relu_cuda_abc1234"
    assert not any(f.startswith("-DTORCH_EXTENSION_NAME") for f in flags)
    assert "-DCUDA_KERNEL" in flags and "-DPy_LIMITED_API=0x03090000" in flags
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in flags
    assert not any(f.startswith("-DTORCH_TARGET_VERSION") for f in flags)
