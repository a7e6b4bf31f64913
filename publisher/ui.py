"""Progress output of a build: a live table on a terminal, plain lines with
`::group::` folding under GitHub Actions, plain lines elsewhere; and the
final summary. All progress goes to stderr; results go to stdout."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

FINAL = ("built", "fetched", "cached", "built-remote", "failed", "unavailable", "cancelled")


@dataclass
class Row:
    name: str
    state: str = "queued"
    started: float | None = None
    seconds: float | None = None
    detail: str = ""


class Progress(Protocol):
    def start(self, names: Sequence[str]) -> None: ...
    def update(self, name: str, state: str, detail: str = "", seconds: float | None = None,
               log: Path | None = None) -> None: ...
    def line(self, name: str, line: str) -> None: ...
    def close(self) -> None: ...


def make_progress(stream: TextIO | None = None) -> Progress:
    stream = stream or sys.stderr
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return GroupedLines(stream)
    if stream.isatty() and os.environ.get("TERM") != "dumb":
        return LiveTable(stream)
    return PlainLines(stream)


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


@dataclass
class PlainLines:
    """One line per state change (pipes, files, CI without folding)."""

    stream: TextIO
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, names: Sequence[str]) -> None:
        self._print(f"building {len(names)} variant(s): {', '.join(names)}")

    def update(self, name, state, detail="", seconds=None, log=None) -> None:
        extra = " ".join(x for x in (_fmt_seconds(seconds), detail) if x)
        self._print(f"{name}: {state}" + (f" ({extra})" if extra else ""))

    def line(self, name, line) -> None:
        pass

    def close(self) -> None:
        pass

    def _print(self, text: str) -> None:
        with self._lock:
            print(text, file=self.stream, flush=True)


class GroupedLines(PlainLines):
    """GitHub Actions: each finished variant prints its log inside a
    ::group:: fold (variants build in parallel, so logs are printed whole)."""

    def update(self, name, state, detail="", seconds=None, log=None) -> None:
        if state not in FINAL:
            return super().update(name, state, detail, seconds, log)
        extra = " ".join(x for x in (_fmt_seconds(seconds), detail) if x)
        body = ""
        if log and Path(log).exists():
            body = Path(log).read_text(errors="replace").rstrip("\n")
        with self._lock:
            print(f"::group::{name}: {state}" + (f" ({extra})" if extra else ""), file=self.stream)
            if body:
                print(body, file=self.stream)
            print("::endgroup::", file=self.stream, flush=True)
            if state == "failed":
                print(f"::error title={name} failed::{detail}", file=self.stream, flush=True)


class LiveTable:
    """Redraws a table (variant, state, time, last output line) in place."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.rows: dict[str, Row] = {}
        self._lock = threading.Lock()
        self._drawn = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self, names: Sequence[str]) -> None:
        self.rows = {n: Row(n) for n in names}
        self._thread.start()

    def update(self, name, state, detail="", seconds=None, log=None) -> None:
        with self._lock:
            row = self.rows.setdefault(name, Row(name))
            if row.started is None and state not in ("queued", *FINAL):
                row.started = time.monotonic()
            row.state, row.detail = state, detail
            if seconds is not None:
                row.seconds = seconds
        self._draw()

    def line(self, name, line) -> None:
        with self._lock:
            if name in self.rows and line.strip():
                self.rows[name].detail = line.strip()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._draw()

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            try:
                width = os.get_terminal_size(self.stream.fileno()).columns
            except (OSError, ValueError):
                width = 100
            name_w = max((len(n) for n in self.rows), default=10)
            lines = []
            now = time.monotonic()
            for row in self.rows.values():
                secs = row.seconds if row.seconds is not None else (now - row.started if row.started else None)
                text = f"{row.name:<{name_w}}  {row.state:<11}  {_fmt_seconds(secs):>7}  {row.detail}"
                lines.append(text[: width - 1])
            out = ("\x1b[F" * self._drawn) + "".join(f"\x1b[2K{line}\n" for line in lines)
            self.stream.write(out)
            self.stream.flush()
            self._drawn = len(lines)


def render_summary(results: Sequence[dict]) -> str:
    """The final table: variant, state, time, and the reason for anything not built."""
    if not results:
        return "nothing to build"
    name_w = max(len(r["variant"]) for r in results)
    lines = []
    for r in results:
        note = r.get("error") or r.get("reason") or (f"from {r['from']}" if r.get("from") else "")
        abi = r.get("abi") or {}
        if not note and abi and not abi.get("ok", True):
            note = f"ABI: {len(abi['violations'])} violation(s), first: {abi['violations'][0]}"
        lines.append(f"{r['variant']:<{name_w}}  {r['state']:<11}  {_fmt_seconds(r.get('seconds')):>7}  {note}".rstrip())
    counts: dict[str, int] = {}
    for r in results:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)
