"""Variant selection by name globs (publisher/plan/selection.py), and the host
platform (publisher/host.py) named as the `kernels` client names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.host import host_platform
from publisher.options import PushOptions, Selection
from publisher.plan.selection import chosen
from publisher.push.stage import _variant_dirs
from publisher.testing.stage import select_variants

NAMES = ["torch215-cxx11-cpu-x86_64-linux", "torch215-cxx11-cu130-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux",
         "torch215-cpu-aarch64-darwin", "torch-cuda"]


@pytest.mark.parametrize("include,skip,expected", [
    ((), (), NAMES),
    (("torch215-*",), (), NAMES[:2] + [NAMES[3]]),
    (("*cu130*",), ("torch214-*",), [NAMES[1]]),
    ((), ("*-linux",), NAMES[3:]),
    (("TORCH215-*",), (), []),  # case-sensitive on every OS, as variant names are
    (("torch-cuda", "*darwin"), (), [NAMES[3], NAMES[4]]),
])
def test_test_and_push_choose_the_same_variants(tmp_path: Path, include, skip, expected):
    for name in NAMES:
        (tmp_path / name).mkdir()
    assert chosen(NAMES, include, skip) == expected
    if expected:
        assert select_variants(NAMES, include, skip) == expected
        assert _variant_dirs(tmp_path, PushOptions(tmp_path, selection=Selection(include, skip))) == sorted(expected)


def test_host_platform_is_what_the_kernels_client_matches():
    # kernels reads the machine itself: a variant named with host_platform() for the
    # running torch must be one it accepts here
    torch = pytest.importorskip("torch")
    from kernels.variants import parse_variant, resolve_variants

    major, minor = torch.__version__.split(".")[:2]
    abi = "-cxx11" if host_platform().endswith("-linux") else ""
    name = f"torch{major}{minor}{abi}-cpu-{host_platform()}"
    accepted, trace = resolve_variants([parse_variant(name)], "cpu")
    assert [v.variant_str for v in accepted] == [name], trace
