"""Line numbers for build.toml keys. tomllib keeps no positions, so this scans
the text once: table headers and `key =` lines at the top level of each table,
skipping over multi-line arrays, inline tables and multi-line strings. It never
raises: on text it cannot follow it simply knows fewer lines."""

from __future__ import annotations

import re

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"?|\'[^\'\n]*\'?')
# what matters while skipping a value: strings, brackets, comments
_TOKEN = re.compile(r'"""|\'\'\'|"(?:[^"\\\n]|\\.)*"?|\'[^\'\n]*\'?|[#\[\]{}]')


class KeyLines:
    def __init__(self, text: str):
        # dotted path -> (first line, last line) of the key/value or table header
        self.spans: dict[tuple[str, ...], tuple[int, int]] = {}
        self._lines = text.splitlines()
        try:
            self._scan()
        except (IndexError, ValueError):
            pass

    def line(self, path: tuple[str, ...] | list[str] | str) -> int | None:
        """Line of `path` or of its nearest enclosing key/table that has one."""
        if isinstance(path, str):
            path = tuple(path.split(".")) if path else ()
        path = tuple(path)
        while path:
            span = self.spans.get(path)
            if span:
                return span[0]
            path = path[:-1]
        return None

    def value_line(self, path: tuple[str, ...], needle: str) -> int | None:
        """Line inside the value of `path` that mentions `needle` (a list item)."""
        span = self.spans.get(tuple(path))
        if span is None:
            return self.line(path)
        for number in range(span[0], span[1] + 1):
            if needle in self._lines[number - 1]:
                return number
        return span[0]

    def _scan(self) -> None:
        table: tuple[str, ...] = ()
        state = _ValueState()
        open_key: tuple[str, ...] | None = None
        for number, raw in enumerate(self._lines, start=1):
            if state.busy:
                state.feed(raw)
                if not state.busy and open_key is not None:
                    self.spans[open_key] = (self.spans[open_key][0], number)
                    open_key = None
                continue
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("["):
                inner = line[2:] if line.startswith("[[") else line[1:]
                keys, _ = _parse_key(inner)
                if keys:
                    table = tuple(keys)
                    for i in range(1, len(table) + 1):
                        self.spans.setdefault(table[:i], (number, number))
                continue
            keys, rest = _parse_key(line)
            if not keys or not rest.startswith("="):
                continue
            path = table + tuple(keys)
            for i in range(len(table) + 1, len(path)):
                self.spans.setdefault(path[:i], (number, number))
            self.spans.setdefault(path, (number, number))
            state.feed(rest[1:])
            if state.busy:
                open_key = path


class _ValueState:
    """Tracks whether a value continues on the next line."""

    def __init__(self) -> None:
        self.depth = 0
        self.multiline: str | None = None  # '"""' or "'''" while inside one

    @property
    def busy(self) -> bool:
        return self.depth > 0 or self.multiline is not None

    def feed(self, text: str) -> None:
        i = 0
        while True:
            if self.multiline:
                end = text.find(self.multiline, i)
                if end < 0:
                    return
                i = end + 3
                self.multiline = None
                continue
            m = _TOKEN.search(text, i)
            if m is None:
                return
            token = m.group()
            i = m.end()
            if token == "#":
                return
            if token in ('"""', "'''"):
                self.multiline = token
            elif token in "[{":
                self.depth += 1
            elif token in "]}":
                self.depth = max(0, self.depth - 1)


def _skip_string(text: str, i: int) -> int:
    m = _STRING.match(text, i)
    return m.end() if m else len(text)


def _parse_key(text: str) -> tuple[list[str], str]:
    """Split a (dotted, possibly quoted) key off the front of `text`."""
    keys: list[str] = []
    i = 0
    while True:
        while i < len(text) and text[i] in " \t":
            i += 1
        if i >= len(text):
            return keys, ""
        if text[i] in "\"'":
            end = _skip_string(text, i)
            keys.append(text[i + 1:end - 1])
            i = end
        else:
            m = _BARE.match(text, i)
            if not m:
                return keys, text[i:].strip()
            keys.append(m.group())
            i = m.end()
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == ".":
            i += 1
            continue
        rest = text[i:].lstrip("]").strip()
        return keys, rest
