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


def _with_nvcc(nvcc):
    from publisher.toolchains.provision import Toolchain

    return Toolchain(key="k", python="python", env_dir=None, python_version="3.11", python_include="/inc",
                     torch_version="2.11.0+cu130", torch_dir="/t", cuda_version="13.0", cuda_home="/cuda",
                     nvcc=nvcc, nvcc_version="13.0", cxx="g++", cxx_version="12", include_dirs=(), library_dirs=())


@pytest.mark.parametrize("archs, cores, files, threads", [
    (10, 2, 1, 2),    # relu on 2 cores: two architectures at a time
    (10, 8, 1, 8),    # one file, 8 cores: 8 at a time
    (10, 16, 1, 10),  # never more threads than architectures
    (10, 8, 2, 4),    # two files share the cores
    (10, 8, 8, 1),    # as many files as cores: ninja runs the files side by side
    (10, 4, 12, 1),
    (1, 8, 1, 1),     # one architecture: nothing to split
    (10, 1, 1, 1),
])
def test_a_variants_cores_go_to_its_cuda_files_architectures(tmp_path, archs, cores, files, threads):
    from publisher.builder.flags import nvcc_threads

    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho '--threads <number> (-t) ...'\n")
    nvcc.chmod(0o755)
    assert nvcc_threads(_with_nvcc(str(nvcc)), archs, cores, files) == threads


def test_an_nvcc_without_threads_compiles_one_architecture_at_a_time(tmp_path):
    from publisher.builder.flags import nvcc_threads

    old = tmp_path / "nvcc"
    old.write_text("#!/bin/sh\necho 'usage: nvcc [options] <inputs>'\n")
    old.chmod(0o755)
    assert nvcc_threads(_with_nvcc(str(old)), 10, 8, 1) == 1
    assert nvcc_threads(_with_nvcc(None), 10, 8, 1) == 1


def test_the_ninja_file_runs_nvcc_in_its_own_pool():
    from pathlib import Path

    from publisher.builder.ninja_file import Compile, NinjaBuild, render

    build = NinjaBuild("g++", "/cuda/bin/nvcc", (Compile(Path("a.cu"), Path("a.o"), "nvcc", ("-O3",)),),
                       Path("lib.so"), (), nvcc_at_once=2)
    text = render(build)
    assert "pool nvcc\n  depth = 2" in text and "  pool = nvcc" in text
    assert "--threads" not in text  # in the environment: other --cores recompile nothing


def test_the_thread_count_joins_the_users_nvcc_append_flags_and_never_overrides_theirs():
    from publisher.builder.flags import nvcc_append_flags

    assert nvcc_append_flags("", 4) == "--threads=4"
    assert nvcc_append_flags("-lineinfo", 4) == "-lineinfo --threads=4"
    assert nvcc_append_flags("--threads=2", 4) is None and nvcc_append_flags("-t 2 -lineinfo", 4) is None
    assert nvcc_append_flags("-lineinfo", 1) is None
