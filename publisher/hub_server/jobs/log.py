"""One job's log: timestamped lines, kept in memory for readers that follow it
and appended to a file (one JSON event a line) so it outlives the server.
`close()` marks the end: a follower's stream ends there, as the Hub's does
when the job is over."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path


def iso_ms(ts: float) -> str:
    """The Hub's timestamp form, e.g. 2026-07-22T16:06:25.079Z (huggingface_hub's parse_datetime reads it)."""
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class JobLog:
    def __init__(self, path: Path):
        self.path = path
        self._events: list[dict] = []
        self._closed = False
        self._cond = threading.Condition()
        if path.exists():  # a job of an earlier run of the server: its log is complete
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.strip():
                    self._events.append(json.loads(line))
            self._closed = True

    def append(self, text: str) -> None:
        event = {"data": text, "timestamp": iso_ms(time.time())}
        with self._cond:
            if self._closed:
                return
            self._events.append(event)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(event) + "\n")
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def start(self, tail: int | None) -> int:
        """Where a reader starts: the beginning, or `tail` events before the end."""
        with self._cond:
            return 0 if tail is None else max(0, len(self._events) - tail)

    def read(self, position: int, wait: float) -> tuple[list[dict], int, bool]:
        """Events from `position` on, waiting up to `wait` seconds for some:
        (events, next position, whether the log is closed and fully read)."""
        deadline = time.monotonic() + wait
        with self._cond:
            while len(self._events) <= position and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            events = self._events[position:]
            return events, position + len(events), self._closed

    def lines(self) -> list[str]:
        with self._cond:
            return [e["data"] for e in self._events]
