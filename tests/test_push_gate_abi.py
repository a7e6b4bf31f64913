"""PP103's fix line says what fixes the ABI failure it reports (publisher/push/gate.py)."""

from __future__ import annotations

from publisher.push import gate

REBUILD = "rebuild it: publisher build --variant 'torch211-cxx11-cu130-x86_64-linux'"
# what kernel-abi-check said of rmsnorm built on the GPU machine (a glibc 2.39 system, gcc 13)
NEWER_GLIBC = ["_rmsnorm_cuda_fa148cc52f.abi3.so: __isoc23_strtoul@2.38 from GLIBC is newer than manylinux_2_28 allows",
               "_rmsnorm_cuda_fa148cc52f.abi3.so: pthread_once@2.34 from GLIBC is newer than manylinux_2_28 allows"]


def test_symbols_of_a_newer_glibc_point_at_the_manylinux_builder_image_not_at_the_same_rebuild():
    fix = gate._abi_fix({"ok": False, "violations": NEWER_GLIBC}, REBUILD, "build/.publisher/logs/x.log")
    assert "publisher build --backend docker --variant 'torch211-cxx11-cu130-x86_64-linux'" in fix
    assert "C library is newer than manylinux_2_28" in fix and "x.log" in fix


def test_other_abi_problems_keep_the_plain_rebuild_hint():
    fix = gate._abi_fix({"ok": False, "violations": ["x.so: Python ABI 3.8 below the abi3 floor 3.9"]}, REBUILD, "l")
    assert fix == f"fix the ABI problems and {REBUILD} (log: l)"
