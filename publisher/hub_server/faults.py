"""Fault injection for the Hub-compatible server, so reliability tests can make
chosen steps fail: answer a 5xx, drop the connection before answering, or
apply a commit and then drop the connection (the client never learns it
landed).

A rule names an endpoint kind (see `ENDPOINTS`), what to do, how many
matching requests to let through first (`after`) and how many to hit
(`times`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

ENDPOINTS = (
    "create-repo", "info", "refs", "branch", "branch-delete", "tag", "preupload", "lfs-batch", "lfs-put",
    "commit", "tree", "paths-info", "commits", "resolve", "validate-yaml", "overview", "whoami", "agent-harnesses",
    "jobs-hardware", "jobs-create", "jobs-list", "jobs-info", "jobs-cancel", "jobs-duplicate", "jobs-labels",
    "jobs-logs", "jobs-metrics", "jobs-expose",
)
# drop-after: do the work, then close without answering; delay: wait `seconds`, then answer normally
ACTIONS = ("status", "drop", "drop-after", "delay")


@dataclass
class FaultRule:
    endpoint: str
    action: str = "status"
    status: int = 500
    times: int = 1
    after: int = 0
    seconds: float = 0.0
    hits: int = 0

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {self.endpoint!r}; one of {', '.join(ENDPOINTS)}")
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}; one of {', '.join(ACTIONS)}")


class Faults:
    """Thread-safe list of rules; `take` decides for one request."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self._lock = threading.Lock()

    def add(self, endpoint: str, action: str = "status", status: int = 500, times: int = 1, after: int = 0,
            seconds: float = 0.0) -> FaultRule:
        rule = FaultRule(endpoint, action, int(status), int(times), int(after), float(seconds))
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def pending(self) -> list[dict]:
        with self._lock:
            return [vars(r).copy() for r in self._rules if r.hits < r.after + r.times]

    def take(self, endpoint: str) -> FaultRule | None:
        """The rule that fires for this request, if any (counts the request)."""
        with self._lock:
            for rule in self._rules:
                if rule.endpoint != endpoint or rule.hits >= rule.after + rule.times:
                    continue
                rule.hits += 1
                if rule.hits > rule.after:
                    return rule
                return None
        return None
