"""One answer to "which torch loads which variant" (publisher/plan/resolver.py,
the real `kernels` resolver): the test stage's choice of interpreter and
push's per-cell verification agree."""

from __future__ import annotations

from dataclasses import replace

import pytest

from publisher.plan.matrix import Cell
from publisher.plan.resolver import System, resolve
from publisher.plan.variants import Variant
from publisher.push.verify import resolve_cells
from publisher.testing.environment import can_load

VARIANTS = ["torch215-cxx11-cu130-x86_64-linux", "torch215-cxx11-cu126-x86_64-linux", "torch215-cxx11-cpu-x86_64-linux",
            "torch214-cxx11-cu130-x86_64-linux", "torch-stable-abi213-cu132-x86_64-linux", "torch215-cpu-aarch64-darwin",
            "torch-cuda"]
# (system, the probe's description of its torch)
# (Linux: the probe reads the C++ ABI torch was compiled with; every torch 2.x Linux wheel has cxx11)
SYSTEMS = [
    (System("2.15", "cu130", "x86_64-linux"), {"torch_version": "2.15.0", "cuda": "13.0", "cxx11_abi": True}),
    (System("2.15", "cu132", "x86_64-linux"), {"torch_version": "2.15.1", "cuda": "13.2", "cxx11_abi": True}),
    (System("2.15", "cu128", "x86_64-linux"), {"torch_version": "2.15.0", "cuda": "12.8", "cxx11_abi": True}),
    (System("2.14", "cu132", "x86_64-linux"), {"torch_version": "2.14.0", "cuda": "13.2", "cxx11_abi": True}),
    (System("2.15", "cpu", "x86_64-linux"), {"torch_version": "2.15.0+cpu", "cxx11_abi": True}),
    (System("2.15", "cpu", "aarch64-darwin"), {"torch_version": "2.15.0"}),
    (System("2.12", "rocm71", "x86_64-linux"), {"torch_version": "2.12.0", "hip": "7.1.1"}),
]


@pytest.mark.parametrize("system,info", SYSTEMS, ids=[s.label for s, _ in SYSTEMS])
def test_test_stage_and_push_verify_agree(system, info):
    loadable = {name for name in VARIANTS if can_load(Variant.parse(name), info, system.platform)}
    cell = Cell(system.torch, system.compute, system.platform, required=True, index_url=None,
                torch_requirement=f"torch=={system.torch}.*")
    (verified,) = resolve_cells(VARIANTS, [cell])
    # What kernels picks by default loads; a CUDA torch also loads the cpu variants of its torch (backend="cpu")
    assert set(resolve(VARIANTS, system).accepted) <= loadable
    assert loadable == {v for c in {system.compute, "cpu"} for v in resolve(VARIANTS, replace(system, compute=c)).accepted}
    assert (verified.variant in loadable) if loadable else (verified.variant is None and verified.reason)


def test_upstream_preference_order():
    # stable ABI first, then the exact torch with the highest CUDA minor not above ours, Python-only last
    found = resolve(VARIANTS, System("2.15", "cu132", "x86_64-linux"))
    assert found.accepted[:2] == ("torch-stable-abi213-cu132-x86_64-linux", "torch215-cxx11-cu130-x86_64-linux")
    assert found.accepted[-1] == "torch-cuda" and "torch215-cxx11-cu126-x86_64-linux" not in found.accepted

