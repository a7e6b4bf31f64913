"""A result carried back through a job's log: JSON, compressed, in numbered
base64 lines a log can hold (`@publisher-result 3/7 <digest> <chunk>`). The
other lines of the log are the job's progress. Decoding takes the last
complete set and checks its digest, so a cut or interleaved log reads as "no
result", never as a wrong one."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import zlib
from collections.abc import Iterable

PREFIX = "@publisher-result"
_CHUNK = 3000
_LINE = re.compile(rf"{re.escape(PREFIX)} (\d+)/(\d+) ([0-9a-f]{{16}}) ([A-Za-z0-9+/=]+)\s*$")


def encode(payload: dict) -> list[str]:
    data = base64.b64encode(zlib.compress(json.dumps(payload, sort_keys=True).encode(), 9)).decode()
    digest = hashlib.sha256(data.encode()).hexdigest()[:16]
    chunks = [data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)] or [""]
    return [f"{PREFIX} {i}/{len(chunks)} {digest} {chunk}" for i, chunk in enumerate(chunks, 1)]


def is_frame(line: str) -> bool:
    return PREFIX in line


def decode(lines: Iterable[str]) -> dict | None:
    sets: dict[str, dict[int, str]] = {}
    totals: dict[str, int] = {}
    order: list[str] = []
    for line in lines:
        m = _LINE.search(line)
        if not m:
            continue
        index, total, digest, chunk = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
        if digest not in sets:
            order.append(digest)
        sets.setdefault(digest, {})[index] = chunk
        totals[digest] = total
    for digest in reversed(order):
        parts = sets[digest]
        if len(parts) != totals[digest] or set(parts) != set(range(1, totals[digest] + 1)):
            continue
        data = "".join(parts[i] for i in range(1, totals[digest] + 1))
        if hashlib.sha256(data.encode()).hexdigest()[:16] != digest:
            continue
        try:
            payload = json.loads(zlib.decompress(base64.b64decode(data)))
        except (ValueError, zlib.error):
            continue
        if isinstance(payload, dict):
            return payload
    return None
