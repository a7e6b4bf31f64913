"""Our variant names against the real `kernels` client: they parse, and its
resolver picks the variant we expect for a given environment."""

from __future__ import annotations

import pytest
from kernels.backends import CPU, CUDA, ROCm
from kernels.variants import VariantAccepted, _resolve_variant_for_system, parse_variant
from packaging.version import Version

from publisher.plan.matrix import load_matrix
from publisher.plan.planner import make_plan
from publisher.plan.variants import Variant, backend_of_compute, compute_version
from publisher.project.load import load_project

CUDA_RMS = """
[general]
name = "rms"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "rocm"]
[torch]
src = ["torch-ext/torch_binding.cpp"]
[kernel.k_cuda]
backend = "cuda"
depends = ["torch"]
src = ["k.cu"]
[kernel.k_rocm]
backend = "rocm"
depends = ["torch"]
src = ["k.cu"]
[kernel.k_cpu]
backend = "cpu"
depends = ["torch"]
src = ["k.cpp"]
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("p") / "build.toml"
    path.write_text(CUDA_RMS)
    project, _ = load_project(path)
    return make_plan(project, load_matrix())


def test_every_planned_name_parses_in_kernels_to_the_same_name(plan):
    assert plan.variants
    for planned in plan.variants:
        parsed = parse_variant(planned.name)
        assert parsed.variant_str == planned.name
        assert Variant.parse(planned.name) == planned.variant


@pytest.mark.parametrize(
    "name",
    ["torch-cpu", "torch-cuda", "torch-stable-abi210-cu126-x86_64-linux", "torch215-metal-aarch64-darwin",
     "torch212-cxx11-rocm71-x86_64-linux", "torch214-cxx11-xpu20253-x86_64-linux"],
)
def test_round_trip_names(name):
    assert Variant.parse(name).name == name
    assert parse_variant(name).variant_str == name


def test_bad_names_are_refused():
    for bad in ["torch", "torch215-cxx11-cu130", "torch215-cxx11-quantum-x86_64-linux", "torch215-cpu-sparc-linux"]:
        with pytest.raises(ValueError):
            Variant.parse(bad)


def test_compute_versions_follow_kernels():
    assert compute_version("cu130") == "13.0" == str(CUDA.parse("cu130").version)
    assert compute_version("cu126") == "12.6" == str(CUDA.parse("cu126").version)
    assert compute_version("rocm71") == "7.1" == str(ROCm.parse("rocm71").version)
    assert backend_of_compute("xpu20253") == "xpu"


def _resolve(plan, backend, torch_version):
    variants = [parse_variant(p.name) for p in plan.variants]
    accepted, trace = _resolve_variant_for_system(
        variants=variants, selected_backend=backend, cpu="x86_64", os="linux",
        torch_version=Version(torch_version), torch_cxx11_abi=True, tvm_ffi_version=None,
    )
    return accepted, trace


@pytest.mark.parametrize(
    "backend,torch_version,expected",
    [
        (CUDA(Version("13.0")), "2.14", "torch214-cxx11-cu130-x86_64-linux"),
        # a CUDA 13.2 system takes the highest minor <= 13.2
        (CUDA(Version("13.2")), "2.15", "torch215-cxx11-cu132-x86_64-linux"),
        (CUDA(Version("13.1")), "2.15", "torch215-cxx11-cu130-x86_64-linux"),
        (CUDA(Version("12.8")), "2.14", "torch214-cxx11-cu126-x86_64-linux"),
        (CPU(), "2.14", "torch214-cxx11-cpu-x86_64-linux"),
        (ROCm(Version("7.2")), "2.15", "torch215-cxx11-rocm72-x86_64-linux"),
    ],
)
def test_kernels_resolver_picks_the_expected_variant(plan, backend, torch_version, expected):
    accepted, _ = _resolve(plan, backend, torch_version)
    assert accepted and accepted[0].variant_str == expected


def test_environment_without_a_variant_gets_reasons(plan):
    accepted, trace = _resolve(plan, CUDA(Version("13.0")), "2.12")
    assert accepted == []
    assert all(not isinstance(d, VariantAccepted) and d.reason for d in trace)
