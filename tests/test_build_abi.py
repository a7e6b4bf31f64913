"""The ABI check, and the glibc shim that lets a build on a newer glibc
(Debian 12: 2.36; Ubuntu 24.04: 2.39, Debian 13: 2.41) still meet manylinux_2_28."""

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from publisher.builder import glibc_compat
from publisher.builder.abi import check_abi

SOURCE = """
#include <memory>
#include <mutex>
#include <cmath>
struct A { int x; };
static std::once_flag flag;
int once() { int v = 0; std::call_once(flag, [&] { v = 1; }); return v; }  // pthread_once: GLIBC_2.34 since 2.34
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
    (tmp_path / "glibc_compat.h").write_text(glibc_compat.header_text())
    flags = ["-include", str(tmp_path / "glibc_compat.h")] if shim else []
    objs = [str(out / "t.o")]
    subprocess.run(["g++", "-O2", "-fPIC", *flags, "-c", str(tmp_path / "t.cpp"), "-o", objs[0]], check=True)
    if shim:
        objs.append(str(out / "compat.o"))
        subprocess.run(["g++", "-x", "c", "-O2", "-fPIC", "-std=gnu11", "-c", str(glibc_compat.SOURCE),
                        "-o", objs[1]], check=True)
    subprocess.run(["g++", "-shared", *objs, "-o", str(out / "x.abi3.so")], check=True)
    for obj in objs:
        Path(obj).unlink()
    return out


def test_plain_build_on_new_glibc_is_flagged(tmp_path):
    report = check_abi(_build(tmp_path, "plain", shim=False))
    if report.ok:
        pytest.skip("this system's glibc/libstdc++ emit no symbol newer than 2.28")
    assert any("__libc_single_threaded" in v or "@2.29" in v for v in report.violations)
    # glibc 2.34 moved libpthread into libc under new versions (this machine's glibc 2.36 included)
    assert any("pthread_once@2.34" in v for v in report.violations), report.violations


def test_shimmed_build_meets_manylinux_2_28(tmp_path):
    out = _build(tmp_path, "fixed", shim=True)
    report = check_abi(out)
    assert report.ok, report.violations
    assert report.checked == ("x.abi3.so",)
    assert "pthread_once@GLIBC_2.2.5" in _undefined(out / "x.abi3.so")  # the version glibc 2.28 exports it under


def test_every_bound_function_is_exported_by_this_glibc_at_the_older_version_the_table_names():
    """The table is checked against the C library at hand: a binding to a version it does not export would
    not link."""
    exports = ""
    for lib in ("libc.so.6", "libm.so.6"):
        path = next((p for d in ("/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib/aarch64-linux-gnu")
                     if (p := Path(d) / lib).exists()), None)
        if path is None:
            pytest.skip(f"no {lib} found where glibc keeps it")
        exports += subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True, check=True).stdout
    import platform
    base = (2, 2, 5) if platform.machine() == "x86_64" else (2, 17)
    versions: dict[str, set[str]] = {}
    for m in re.finditer(r"GLIBC_([\d.]+)\)?\s+(\S+)$", exports, re.M):
        versions.setdefault(m.group(2), set()).add(m.group(1))
    checked = 0
    for name, old in glibc_compat.bindings().items():
        if name not in versions:
            continue  # not in this glibc's libc/libm (librt, libdl names before glibc 2.34)
        version = ".".join(map(str, max(tuple(map(int, old.split("."))), base)))
        assert version in versions[name], (name, version, versions[name])
        checked += 1
    assert checked >= 150, checked  # pthread, dl, sem, libm: nearly all of them are in a glibc >= 2.34


# What a unit compiled against glibc >= 2.38 with _GNU_SOURCE (every g++ build) calls: its <stdlib.h> and <stdio.h>
# redirect strtol, strtoul, ... and sscanf to these (GLIBC_2.38). Declared by hand, so any glibc shows it.
ISOC23_CALLER = """
long __isoc23_strtol(const char *, char **, int);
unsigned long __isoc23_strtoul(const char *, char **, int);
long long __isoc23_strtoll(const char *, char **, int);
unsigned long long __isoc23_strtoull(const char *, char **, int);
int __isoc23_sscanf(const char *, const char *, ...);
long parse_l(const char *s, int base) { return __isoc23_strtol(s, 0, base); }
unsigned long parse_ul(const char *s) { return __isoc23_strtoul(s, 0, 10); }
long long parse_ll(const char *s) { return __isoc23_strtoll(s, 0, 0); }
unsigned long long parse_ull(const char *s) { return __isoc23_strtoull(s, 0, 16); }
int scan_two(const char *s) { int a = 0, b = 0; return __isoc23_sscanf(s, "%d %d", &a, &b) == 2 ? a * 100 + b : -1; }
"""

# What code compiled before the build references directly (a static libstdc++, as the GPU machine's gcc 13 links):
# glibc 2.33's stat functions, 2.36's arc4random, 2.32's __libc_single_threaded. This glibc (>= 2.36) has them all.
PRECOMPILED_CALLER = """
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
extern char __libc_single_threaded;
long long size_of(const char *path) { struct stat64 st; return stat64(path, &st) == 0 ? (long long)st.st_size : -1; }
long long lsize_of(const char *path) { struct stat st; return lstat(path, &st) == 0 ? (long long)st.st_size : -1; }
long long fsize_of(int fd) { struct stat64 st; return fstat64(fd, &st) == 0 ? (long long)st.st_size : -1; }
int distinct_randoms(void) { uint32_t a = arc4random(), b = arc4random(); return a != b || arc4random_uniform(7) < 7; }
int single_threaded(void) { return __libc_single_threaded; }
#include <pthread.h>
static int calls;
static void init(void) { calls++; }
static void *twice(void *x) { return (void *)((long)x * 2); }
int threads_work(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init);
  pthread_once(&once, init);
  pthread_key_t key;
  if (pthread_key_create(&key, 0) || pthread_setspecific(key, (void *)7) || pthread_getspecific(key) != (void *)7) return -1;
  pthread_key_delete(key);
  pthread_t thread;
  void *result = 0;
  if (pthread_create(&thread, 0, twice, (void *)21) || pthread_join(thread, &result)) return -2;
  return calls * 1000 + (int)(long)result;
}
"""


def _undefined(library: Path) -> str:
    return subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("shim", [False, True], ids=["plain", "shimmed"])
def test_what_precompiled_code_asks_of_a_newer_glibc_is_defined_in_the_library_by_the_shim(tmp_path, shim):
    """The GPU machine's gcc 13 links libstdc++ statically: its objects ask for arc4random@2.36, stat64@2.33,
    fstat64@2.33, __libc_single_threaded@2.32 and pthread_once@2.34 (4, then 1, violations on every real project
    built there). The shim defines each inside the library, through what glibc 2.28 exports, same results."""
    library = _link_c(tmp_path, PRECOMPILED_CALLER, shim)
    if not shim:
        assert {"stat64", "fstat64", "arc4random", "pthread_once"} <= set(re.findall(r"U (\w+)@", _undefined(library)))
        return
    assert not re.search(r"\b(l?stat64|fstat64|lstat|arc4random\w*|__libc_single_threaded)@", _undefined(library))
    assert "pthread_once@GLIBC_2.2.5" in _undefined(library) or "pthread_once@GLIBC_2.17" in _undefined(library)
    assert check_abi(library.parent).ok, check_abi(library.parent).violations
    lib = ctypes.CDLL(str(library))
    lib.size_of.restype = lib.lsize_of.restype = lib.fsize_of.restype = ctypes.c_longlong
    probe = tmp_path / "probe.bin"
    probe.write_bytes(b"x" * 1234)
    assert lib.size_of(str(probe).encode()) == 1234 and lib.lsize_of(str(probe).encode()) == 1234
    assert lib.size_of(str(tmp_path / "absent").encode()) == -1
    with probe.open("rb") as fh:
        assert lib.fsize_of(fh.fileno()) == 1234
    assert lib.distinct_randoms() == 1
    assert lib.single_threaded() == 0  # "maybe multi-threaded", what glibc < 2.32 answers
    assert lib.threads_work() == 1042  # init once; a thread-specific value; a thread's result


def _link_c(tmp_path: Path, source: str, shim: bool) -> Path:
    (tmp_path / "caller.c").write_text(source)
    objs = [str(tmp_path / "caller.o")]
    subprocess.run(["gcc", "-O2", "-fPIC", "-c", str(tmp_path / "caller.c"), "-o", objs[0]], check=True)
    if shim:
        objs.append(str(tmp_path / "compat.o"))
        subprocess.run(["gcc", "-O2", "-fPIC", "-std=gnu11", "-c", str(glibc_compat.SOURCE), "-o", objs[1]],
                       check=True)
    out = tmp_path / "variant"
    out.mkdir()
    library = out / "x.abi3.so"
    subprocess.run(["gcc", "-shared", *objs, "-o", str(library)], check=True)
    return library


@pytest.mark.parametrize("shim", [False, True], ids=["plain", "shimmed"])
def test_the_c23_symbols_of_glibc_2_38_are_defined_in_the_library_by_the_shim(tmp_path, shim):
    """Every glibc >= 2.38 build asks for __isoc23_strtol & co. (5 violations on each real project built on the
    GPU machine's glibc 2.39): the shim defines them inside the library as the classic functions, so the library
    asks glibc for none and computes what a build on an older glibc computes (0b101 is not read as binary)."""
    library = _link_c(tmp_path, ISOC23_CALLER, shim)
    out = library.parent
    if not shim:
        assert "__isoc23_strtol" in _undefined(library)  # what glibc < 2.38 cannot resolve
        return
    assert "isoc23" not in _undefined(library)
    assert check_abi(out).ok, check_abi(out).violations
    lib = ctypes.CDLL(str(library))
    lib.parse_l.restype, lib.parse_ul.restype = ctypes.c_long, ctypes.c_ulong
    lib.parse_ll.restype, lib.parse_ull.restype = ctypes.c_longlong, ctypes.c_ulonglong
    assert lib.parse_l(b"-17", 10) == -17 and lib.parse_l(b"0x1f", 0) == 31 and lib.parse_l(b"0b101", 0) == 0
    assert lib.parse_ul(b"4294967296") == 4294967296 and lib.parse_ll(b"-0x10") == -16
    assert lib.parse_ull(b"ffffffffffffffff") == 2**64 - 1
    assert lib.scan_two(b"4 2") == 402
