"""Upstream's own build.toml parser as the last word.

The kernels wheel publisher depends on embeds the config crate kernel-builder
and the client share, as `kernels._rust`; `Build.open(dir)` parses and
validates `dir/build.toml` exactly as kernel-builder does (every edition it
reads, v4 upgraded in memory). `check` runs it on the bytes it read: a file
publisher's rules pass but upstream refuses gets upstream's message as a
located finding (PB110). The parser is optional: without an importable,
working kernels, check runs on publisher's rules alone and says so (PB111).

publisher's rules refuse some files upstream's parser accepts, each because
upstream refuses them one step later; `LATER_REFUSALS` names every such rule
and that step. Everything else publisher adds beyond the parser is a warning.
tests/test_upstream_parser.py holds the two parsers to this, file by file."""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from publisher.codes import finding
from publisher.findings import Finding
from publisher.project.locate import KeyLines

LATER_REFUSALS: dict[str, str] = {
    "PB207": "the kernels client refuses to load a variant whose Python dependency is not curated",
    "PB208": "the kernels client cannot resolve a kernel dependency that is not a Hub repository id",
    "PB212": "kernel-builder's CMake stops on a kernel (or tvm-ffi binding) without sources",
    "PB213": "the Hub refuses the repository id when kernel-builder uploads",
    "PB302": "kernel-builder's CMake configure stops: empty set of capabilities after intersection",
    "PB304": "kernel-builder's CMake configure stops: no ROCm architecture left after intersection",
}

_STDERR_LOCK = threading.Lock()
_TOML_LINE = re.compile(r"TOML parse error at line (\d+)")
_UNKNOWN_FIELD = re.compile(r"Unknown field ([^\s.]+)")
_VALUE = re.compile(r"Unknown variant ([^\s.]+)|`([^`]+)`|string \"([^\"]*)\"")


@dataclass(frozen=True)
class UpstreamVerdict:
    accepted: bool
    message: str = ""  # upstream's reason, when refused


class ParserUnavailable(Exception):
    """kernels cannot be imported, or its parser broke (not a verdict on the file)."""


def parse(raw: bytes) -> UpstreamVerdict:
    """Upstream's verdict on build.toml bytes; ParserUnavailable when there is none."""
    try:
        from kernels._rust import Build
    except Exception as err:  # not installed, or a wheel for another platform/Python
        raise ParserUnavailable(f"cannot import kernels._rust ({type(err).__name__}: {err})") from None
    with tempfile.TemporaryDirectory(prefix="publisher-upstream-") as folder:
        Path(folder, "build.toml").write_bytes(raw)
        try:
            with _quiet_stderr():
                Build.open(folder)
        except ValueError as err:
            return UpstreamVerdict(False, _reason(str(err), folder))
        except Exception as err:
            raise ParserUnavailable(f"kernels._rust failed ({type(err).__name__}: {err})") from None
        except BaseException as err:  # a Rust panic arrives as pyo3's PanicException (a BaseException)
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            raise ParserUnavailable(f"kernels._rust crashed ({type(err).__name__}: {err})") from None
    return UpstreamVerdict(True)


def _reason(message: str, folder: str) -> str:
    """Upstream's message without the temporary paths it names."""
    for prefix in ("Cannot parse build configuration in", "Cannot parse TOML in"):
        message = re.sub(rf"{prefix} `?[^`:]*`?:\s*", "", message)
    return message.replace(f"{folder}/build.toml", "build.toml").replace(folder, ".").strip()


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Upstream prints its own notes (the v4 upgrade) on file descriptor 2;
    check reports those itself (PB102), so they are dropped."""
    with _STDERR_LOCK:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):  # no stderr: nothing to keep quiet
            yield
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def refusal_finding(message: str, text: str | None, file: str) -> Finding:
    """PB110: upstream refused a file publisher's rules passed; located at the
    line upstream names, or the key or value its message quotes."""
    line, field = _locate(message, text)
    return finding("PB110", f"upstream's build.toml parser (the one kernel-builder uses) refuses this file: {message}",
                   file=file, line=line, field=field,
                   hint="fix what it names; publisher's own rules missed it, please report it to publisher")


def _locate(message: str, text: str | None) -> tuple[int | None, str | None]:
    m = _TOML_LINE.search(message)
    if m:
        return int(m[1]), None
    if text is None:
        return None, None
    lines = KeyLines(text)
    m = _UNKNOWN_FIELD.search(message)
    if m:
        for path in lines.spans:
            if path[-1] == m[1]:
                return lines.line(path), ".".join(path)
    for groups in _VALUE.findall(message):
        value = next((g for g in groups if g), None)
        if value is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if (f'"{value}"' in line or f"'{value}'" in line) and not line.lstrip().startswith("#"):
                return number, None
    return None, None


def unavailable_finding(reason: str, file: str) -> Finding:
    return finding("PB111", f"upstream's build.toml parser was not run: {reason}; checked with publisher's rules only",
                   file=file, hint="install the kernels package publisher depends on (pip install 'kernels==0.17.2') "
                   "to have check confirm each file with kernel-builder's own parser")
