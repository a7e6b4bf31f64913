"""The ABI check, and the glibc shim that lets a build on a newer glibc
(Debian 12: 2.36) still meet manylinux_2_28."""

import shutil
import subprocess
from pathlib import Path

import pytest

from publisher.builder.abi import check_abi
from publisher.builder.compile import _SINGLE_THREADED, RESOURCES

SOURCE = """
#include <memory>
#include <cmath>
struct A { int x; };
std::shared_ptr<A> make(int v) { auto p = std::make_shared<A>(); p->x = v; return p; }
double f(double x) { return std::exp(x) + std::log(x) + std::pow(x, 1.5) + std::exp2(x) + std::log2(x); }
int use() { auto a = make(3); auto b = a; return b->x; }
"""

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _build(tmp_path, name, shim: bool):
    """Compile then link, one object per source, as the ninja build does."""
    (tmp_path / "t.cpp").write_text(SOURCE)
    out = tmp_path / name
    out.mkdir()
    flags = ["-include", str(RESOURCES / "glibc_compat.h"), _SINGLE_THREADED] if shim else []
    objs = [str(out / "t.o")]
    subprocess.run(["g++", "-O2", "-fPIC", *flags, "-c", str(tmp_path / "t.cpp"), "-o", objs[0]], check=True)
    if shim:
        objs.append(str(out / "compat.o"))
        subprocess.run(["g++", "-x", "c", "-O2", "-fPIC", "-c", str(RESOURCES / "glibc_compat.c"), "-o", objs[1]],
                       check=True)
    subprocess.run(["g++", "-shared", *objs, "-o", str(out / "x.abi3.so")], check=True)
    for obj in objs:
        Path(obj).unlink()
    return out


def test_plain_build_on_new_glibc_is_flagged(tmp_path):
    report = check_abi(_build(tmp_path, "plain", shim=False))
    if report.ok:
        pytest.skip("this system's glibc/libstdc++ emit no symbol newer than 2.28")
    assert any("__libc_single_threaded" in v or "@2.29" in v for v in report.violations)


def test_shimmed_build_meets_manylinux_2_28(tmp_path):
    report = check_abi(_build(tmp_path, "fixed", shim=True))
    assert report.ok, report.violations
    assert report.checked == ("x.abi3.so",)
