"""backend.archs tells the truth: the GPU code a library carries, read from its
fat binary, agrees with `cuobjdump` (PyPI's nvidia-cuda-cuobjdump); a CUDA
variant built here (nvcc 13.0, the torch 2.14 CUDA 13.0 toolchain) declares
exactly the code its .so carries; a build or a push whose archs and binary
disagree stops, naming the difference."""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from publisher.builder.fatbin import archs_difference, declared, read_device_code
from publisher.push import gate

from build_fixtures import write_tiny_project
from cli_helper import run_cli

pytestmark = pytest.mark.slow  # compiles with nvcc

NVCC = shutil.which("nvcc")
CUOBJDUMP = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cu13" / "bin" / "cuobjdump"
VARIANT = "torch214-cxx11-cu130-x86_64-linux"
KERNEL = "__global__ void scale(float *x, float f, int n) { int i = threadIdx.x; if (i < n) x[i] *= f; }\n"

# -gencode pairs (arch, code) -> what the library then carries, in metadata.json's notation
LIBRARIES = {
    "plain-and-ptx": ([("compute_75", "sm_75"), ("compute_80", "sm_80"), ("compute_120", "sm_120"),
                       ("compute_120", "compute_120")], ("7.5", "8.0", "12.0+PTX")),
    "arch-specific": ([("compute_90a", "sm_90a"), ("compute_100a", "sm_100a"), ("compute_90a", "compute_90a")],
                      ("9.0a+PTX", "10.0a")),
    "family-specific": ([("compute_100f", "sm_100f"), ("compute_120f", "sm_120f"), ("compute_100f", "compute_100f"),
                         ("compute_86", "sm_86")], ("8.6", "10.0f+PTX", "12.0f")),
}


def _cuobjdump(library: Path, what: str) -> set[str]:
    """`cuobjdump --list-elf` / `--list-ptx`: the architecture of each listed file (sm_90a, sm_100f ...)."""
    out = subprocess.run([str(CUOBJDUMP), f"--list-{what}", str(library)], capture_output=True, text=True, check=True)
    return {line.rsplit(".", 2)[-2] for line in out.stdout.splitlines() if line.strip()}


def _sm(arch: str) -> str:
    return "sm_" + arch.replace(".", "")


@pytest.mark.parametrize("name", sorted(LIBRARIES))
def test_the_fatbin_reader_agrees_with_cuobjdump(tmp_path, name):
    assert NVCC and CUOBJDUMP.is_file(), "nvcc and the nvidia-cuda-cuobjdump wheel (the test extra) are needed"
    gencode, expected = LIBRARIES[name]
    (tmp_path / "k.cu").write_text(KERNEL)
    library = tmp_path / "k.so"
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(library), str(tmp_path / "k.cu"),
                    *(f"-gencode=arch={a},code={c}" for a, c in gencode)], check=True, capture_output=True)
    code = read_device_code(library)
    assert code.archs() == expected
    # cuobjdump names SASS sm_XY / sm_XYa (a family-specific cubin as plain sm_XY) and PTX sm_XY[a|f]
    assert _cuobjdump(library, "elf") == {_sm(a.removesuffix("f")) for a in code.sass}
    assert _cuobjdump(library, "ptx") == {_sm(a) for a in code.ptx}
    assert archs_difference(expected, code) == []


def _tiny_with(tmp_path, capabilities: str):
    """The tiny CUDA project with its kernel's `cuda-capabilities = ...` line replaced by `capabilities`."""
    root = write_tiny_project(tmp_path / "tiny")
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace('cuda-capabilities = ["8.0", "9.0+PTX"]', capabilities))
    return root


def test_a_cuda_variant_declares_exactly_the_code_its_library_carries(tmp_path):
    root = _tiny_with(tmp_path, 'cuda-capabilities = ["7.5", "9.0a", "10.0f", "12.0+PTX"]')
    built = run_cli("build", str(root), "--variant", VARIANT, "--json", timeout=3000)
    log = root / "build" / ".publisher" / "logs" / f"{VARIANT}.log"
    assert built.returncode == 0, built.output + (log.read_text()[-3000:] if log.is_file() else "")
    variant = root / "build" / VARIANT
    archs = tuple(json.loads((variant / "metadata.json").read_text())["backend"]["archs"])
    (library,) = variant.glob("*.so")
    code = read_device_code(library)
    assert archs == code.archs() == ("7.5", "9.0a", "10.0f", "12.0+PTX")
    assert _cuobjdump(library, "elf") == {"sm_75", "sm_90a", "sm_100", "sm_120"}
    assert _cuobjdump(library, "ptx") == {"sm_120"}

    # metadata that says less than the binary (another builder's, or edited): push refuses it, with the difference
    metadata = json.loads((variant / "metadata.json").read_text())
    metadata["backend"]["archs"] = ["7.5", "9.0a", "10.0f", "12.0"]
    (variant / "metadata.json").write_text(json.dumps(metadata))
    (refusal,) = [f for f in gate.judge(root / "build", VARIANT, allow_untested=True).findings if f.code == "PP140"]
    assert "the library carries PTX for compute_120 that archs does not declare (as 12.0+PTX)" in refusal.message
    shutil.rmtree(variant)  # edited on purpose: not one of the builds the end of the test run parses


def test_a_build_whose_flags_add_code_the_metadata_would_not_declare_fails_with_the_difference(tmp_path):
    root = _tiny_with(tmp_path, 'cuda-capabilities = ["8.0"]\ncuda-flags = ["-gencode=arch=compute_89,code=sm_89"]')
    built = run_cli("build", str(root), "--variant", VARIANT, "--json", timeout=3000)
    assert built.returncode == 1, built.output
    (entry,) = json.loads(built.stdout)["variants"]
    assert entry["state"] == "failed"
    assert "backend.archs in metadata.json differ from the GPU code of the library" in entry["error"]
    assert "the library carries SASS for sm_89 that archs does not declare" in entry["error"]
    assert not (root / "build" / VARIANT).exists()  # no half-written variant


def test_declared_archs_follow_upstreams_notation():
    promised = declared(("8.0", "9.0a+PTX", "10.0f", "not-cuda"))
    assert promised.sass == {"8.0", "9.0a", "10.0f"} and promised.ptx == {"9.0a"}
