"""Which torch can test which variant (the `kernels` resolution rules)."""

from __future__ import annotations

import pytest

from publisher.plan.variants import Variant
from publisher.testing.environment import can_load

HOST = "x86_64-linux"
CPU_213 = {"torch_version": "2.13.0+cpu", "cuda": None, "hip": None, "xpu": None}
CU130_211 = {"torch_version": "2.11.0", "cuda": "13.0", "hip": None, "xpu": None}


@pytest.mark.parametrize("variant, torch, expected", [
    ("torch213-cxx11-cpu-x86_64-linux", CPU_213, True),
    ("torch212-cxx11-cpu-x86_64-linux", CPU_213, False),  # another torch minor
    ("torch213-cxx11-cpu-aarch64-linux", CPU_213, False),  # another platform
    ("torch213-cxx11-cu130-x86_64-linux", CPU_213, False),  # a CPU torch cannot load CUDA code
    ("torch211-cxx11-cu130-x86_64-linux", CU130_211, True),
    ("torch211-cxx11-cu128-x86_64-linux", CU130_211, False),  # CUDA major differs
    ("torch211-cxx11-cpu-x86_64-linux", CU130_211, False),  # kernels picks the CUDA backend there
    ("torch-stable-abi210-cu130-x86_64-linux", CU130_211, True),  # stable ABI: any newer torch
    ("torch-stable-abi212-cu130-x86_64-linux", CU130_211, False),
    ("torch-cpu", CPU_213, True),
    ("torch-cuda", CPU_213, False),
    ("torch-cuda", CU130_211, True),
    ("torch-universal", CU130_211, True),
])
def test_can_load(variant, torch, expected):
    assert can_load(Variant.parse(variant), torch, HOST) is expected


def test_cuda_minor_of_the_variant_may_be_older():
    cu132 = dict(CU130_211, cuda="13.2")
    assert can_load(Variant.parse("torch211-cxx11-cu130-x86_64-linux"), cu132, HOST)
    assert not can_load(Variant.parse("torch211-cxx11-cu132-x86_64-linux"), CU130_211, HOST)


def test_no_torch_loads_nothing():
    assert not can_load(Variant.parse("torch-cpu"), {"error": "torch is not installed"}, HOST)
