"""An answer of the Hub-compatible server, built by the endpoint functions
(server.py, jobs/api.py) and sent by the request handler."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Reply:
    status: int = 200
    body: bytes | object = b""
    headers: dict[str, str] = field(default_factory=dict)
    # body sent from an iterator: with a Content-Length header set by the caller, or else
    # until the connection closes (a server-sent event stream)
    stream: Iterator[bytes] | None = None


def json_reply(data: object, status: int = 200, headers: dict | None = None) -> Reply:
    return Reply(status, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})})
