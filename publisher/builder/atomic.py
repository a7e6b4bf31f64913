"""Atomic output: a variant is built in build/.publisher/staging/ and swapped
into build/<variant>/ only when complete, so a failed, interrupted or killed
build never leaves a partial variant and never removes a good older one."""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from publisher import runner, state
from publisher.errors import UsageError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def work_dir(build_dir: Path, variant: str) -> Path:
    """Persistent per-variant scratch (object files) for incremental rebuilds."""
    return state.state_dir(build_dir) / "work" / variant


@contextmanager
def build_lock(build_dir: Path) -> Iterator[None]:
    """One build at a time per build folder; while held, every staging folder
    is ours, so leftovers from killed runs can be removed."""
    sdir = state.state_dir(build_dir)
    sdir.mkdir(parents=True, exist_ok=True)
    with open(sdir / "build.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"another `publisher build` is using {build_dir}",
                "wait for it to finish (a killed build's compilers stop within seconds), or pass a different --out"
            ) from None
        try:
            shutil.rmtree(state.staging_dir(build_dir), ignore_errors=True)
            with runner.inherited(fh.fileno()):  # compilers left by a killed build keep the folder locked
                yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def new_stage(build_dir: Path, variant: str) -> Path:
    staging = state.staging_dir(build_dir)
    staging.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{variant}-", dir=staging))
    path.chmod(0o755)  # mkdtemp makes it private; a variant folder is for everyone to read
    return path


def discard(stage: Path) -> None:
    shutil.rmtree(stage, ignore_errors=True)


def promote(stage: Path, target: Path) -> None:
    """Put the complete `stage` at `target`, replacing an older variant."""
    if target.exists() and _exchange(stage, target):
        shutil.rmtree(stage, ignore_errors=True)  # now holds the old variant
        return
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f"{target.name}-old-", dir=stage.parent))
        os.rename(target, old / "v")
        os.rename(stage, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(stage, target)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0
