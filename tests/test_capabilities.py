"""Effective architecture sets, checked against results of kernel-builder's
CMake `cuda_archs_loose_intersection` / `hip_archs_loose_intersection` (each
expected tuple below is what that CMake function printed for the same input)."""

import pytest

from publisher.plan.capabilities import (
    Capability,
    effective_cuda_archs,
    effective_rocm_archs,
    is_known_capability,
    is_known_rocm_arch,
    known_cuda_capabilities,
    parse_capability,
)

CUDA_13 = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX")
CUDA_12_8 = ("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX")
CUDA_12_6 = ("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX")
ROCM = ("gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1200", "gfx1201")


@pytest.mark.parametrize(
    "kernel, defaults, expected",
    [
        # the upstream doc-comment example: 9.0a takes target 9.0, so plain 9.0 is not added
        (("7.5", "8.0", "8.6", "9.0", "9.0a"), ("8.0", "8.9", "9.0"), ("8.0", "8.6", "9.0a")),
        # each target takes the highest kernel capability <= it of the same major
        (("8.0",), CUDA_13, ("8.0",)),
        (("7.0", "8.0"), CUDA_13, ("7.0", "8.0")),
        (("5.0", "7.5", "8.0", "9.0"), CUDA_12_6, ("7.5", "8.0", "9.0")),
        (("12.0",), CUDA_13, ("12.0",)),
        # +PTX on the kernel side matches across majors and keeps its suffix
        (("8.0+PTX",), ("9.0",), ("8.0+PTX",)),
        (("8.0+PTX",), CUDA_13, ("8.0+PTX",)),
        # family / arch-specific entries need their base among the targets
        (("10.0f", "9.0a"), CUDA_13, ("9.0a", "10.0f")),
        (("10.0", "10.0f"), CUDA_13, ("10.0f",)),
        (("9.0a+PTX",), CUDA_13, ("9.0a+PTX",)),
        (("10.1a",), CUDA_13, ()),
        (("10.1a", "8.0"), CUDA_12_8, ("8.0", "10.1a")),
        # capabilities the toolkit cannot reach fall out; nothing left is the upstream error
        (("99999.0",), CUDA_13, ()),
        (("11.8",), CUDA_12_8, ()),
        (("10.0",), CUDA_12_6, ()),
        # megablocks' real list: 11.8 contributes nothing, the rest stays
        (("7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "11.8", "12.0"), CUDA_13,
         ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0")),
    ],
)
def test_effective_cuda_archs_matches_upstream(kernel, defaults, expected):
    assert effective_cuda_archs(kernel, defaults) == expected


@pytest.mark.parametrize("kernel", [None, ()])
def test_no_capability_list_means_toolkit_defaults_with_ptx(kernel):
    assert effective_cuda_archs(kernel, CUDA_13) == CUDA_13


def test_duplicates_collapse():
    assert effective_cuda_archs(("8.0", "8.0", "8.0+PTX"), ("8.0", "8.6")) == ("8.0+PTX",)


def test_rocm_intersection_sorts_like_cmake_strings():
    assert effective_rocm_archs(("gfx90a", "gfx940", "gfx942", "gfx1100"), ROCM) == ("gfx1100", "gfx90a", "gfx942")
    assert effective_rocm_archs(("gfx99999",), ROCM) == ()
    assert effective_rocm_archs(None, ROCM) == ROCM
    assert effective_rocm_archs((), ROCM) == ROCM


@pytest.mark.parametrize("text", ["11.8", "99999.0", "8.0a", "7.5f", "9.1", "0.0"])
def test_unknown_capabilities_raise(text):
    with pytest.raises(ValueError, match="capability"):
        parse_capability(text)
    assert not is_known_capability(text)


@pytest.mark.parametrize("text", ["9", "sm_90", "9.0b", "9.0 ", "9.0+ptx", "", "compute_90"])
def test_malformed_capabilities_raise(text):
    with pytest.raises(ValueError):
        parse_capability(text)


def test_parse_capability_fields():
    assert parse_capability("10.0f") == Capability(10, 0, "f", False)
    assert parse_capability("12.0+PTX") == Capability(12, 0, "", True)
    assert str(parse_capability("9.0a+PTX")) == "9.0a+PTX"


def test_every_default_and_corpus_value_is_known():
    for value in CUDA_13 + CUDA_12_8 + CUDA_12_6 + ("9.0a", "10.0a", "10.0f", "10.1a", "12.0a", "5.0"):
        assert is_known_capability(value), value
    assert "11.8" not in known_cuda_capabilities()


def test_rocm_known_archs():
    assert all(is_known_rocm_arch(a) for a in ROCM + ("gfx940", "gfx941", "gfx1150"))
    assert not is_known_rocm_arch("gfx99999")
    assert not is_known_rocm_arch(None)
