"""Compiler and linker flags for one variant: what the kernel-builder layout
promises a kernel's sources (UPSTREAM.md section 2) plus what torch needs."""

from __future__ import annotations

import functools
import re

from publisher import runner
from publisher.toolchains.provision import Toolchain

PY_LIMITED_API = "0x03090000"  # abi3 for CPython >= 3.9, as upstream


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """`8.0` -> sm_80; `9.0a` -> sm_90a; `12.1+PTX` -> sm_121 and PTX compute_121."""
    flags: list[str] = []
    for arch in archs:
        m = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", arch)
        if not m:
            raise ValueError(f"not a CUDA capability: {arch!r} (expected e.g. 8.0, 9.0a, 12.0+PTX)")
        major, minor, suffix, ptx = m.groups()
        code = f"{major}{minor}{suffix}"
        flags.append(f"-gencode=arch=compute_{code},code=sm_{code}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{code},code=compute_{code}")
    return flags


def stable_abi_define(version: str) -> str:
    """TORCH_TARGET_VERSION as torch documents it: (major << 56) | (minor << 48)."""
    major, minor = (int(x) for x in version.split(".")[:2])
    return f"-DTORCH_TARGET_VERSION={hex((major << 56) | (minor << 48))}"


OPS_MACRO = "TORCH_EXTENSION_NAME"


def ops_define(ops_id: str) -> str:
    """Given only to the translation units that name the macro (compile.py):
    a new ops id then recompiles the binding, not every kernel."""
    return f"-D{OPS_MACRO}={ops_id}"


def defines(backend: str, stable_abi: str | None) -> list[str]:
    out = [
        f"-D{backend.upper()}_KERNEL",
        f"-DPy_LIMITED_API={PY_LIMITED_API}",
        "-D_GLIBCXX_USE_CXX11_ABI=1",
    ]
    if backend == "cuda":
        out += ["-DUSE_CUDA=1", "-DENABLE_FP8"]
    if stable_abi:
        out.append(stable_abi_define(stable_abi))
    return out


# Upstream builds every variant as C++20; -fno-gnu-unique keeps template
# statics of two kernels loaded side by side from colliding (as upstream).
CXX_STD = "c++20"


def cxx_flags(debug: bool) -> list[str]:
    return [f"-std={CXX_STD}", "-fPIC", "-fno-gnu-unique", *(["-O0", "-g"] if debug else ["-O3"])]


def nvcc_flags(toolchain: Toolchain, debug: bool) -> list[str]:
    return [
        f"-std={CXX_STD}",
        f"-ccbin={toolchain.cxx}",
        "-Xcompiler=-fPIC,-fno-gnu-unique",
        # what torch's CMake (Caffe2 public/cuda.cmake, read by kernel-builder's find_package(Torch)) gives
        # every upstream CUDA unit: __device__ lambdas (kernels-community/rotary) and constexpr across spaces
        "--expt-relaxed-constexpr",
        "--expt-extended-lambda",
        *(["-O0", "-g", "-lineinfo"] if debug else ["-O3"]),
    ]


def nvcc_threads(toolchain: Toolchain, archs: int, cores: int, cuda_files: int) -> int:
    """Threads each nvcc gets (`--threads`: its architectures compile side by
    side), so that a variant's CUDA files together use its cores: one file
    with ten architectures on 8 cores gets 8, eight files get 1 each (ninja
    runs them side by side instead). nvcc's own `--jobserver` is not used: on
    nvcc 13.0 it took no slot from the build's pool (measured: one architecture
    at a time with 4 or 8 free slots)."""
    if archs < 2 or cores < 2 or not toolchain.nvcc or not _nvcc_has_threads(toolchain.nvcc):
        return 1
    return max(1, min(archs, cores // max(1, min(cuda_files, cores))))


def nvcc_append_flags(user: str, threads: int) -> str | None:
    """NVCC_APPEND_FLAGS carrying `threads` (None: leave it as it is). A
    thread count the user set there wins."""
    if threads < 2 or re.search(r"(^|\s)(--threads|-t)(=|\s|$)", user):
        return None
    return f"{user} --threads={threads}".strip()


@functools.cache
def _nvcc_has_threads(nvcc: str) -> bool:
    result = runner.run([nvcc, "--help"])
    return result.ok and "--threads" in result.output


def torch_libraries(backend: str) -> list[str]:
    libs = ["c10", "torch", "torch_cpu"]
    if backend == "cuda":
        libs += ["torch_cuda", "c10_cuda"]
    return [f"-l{lib}" for lib in libs]


def openmp_link_flags(compile_flags) -> list[str]:
    """-fopenmp compiles OpenMP pragmas into libgomp calls; the link needs it too,
    or the library depends on torch having loaded libgomp first."""
    found = [f for f in compile_flags if f == "-fopenmp" or f.startswith("-fopenmp=")]
    return found[:1]
