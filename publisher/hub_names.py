"""What the Hub accepts as an owner (user or org) and a repo id; checked before
any call so that a typo is a clear usage error. No Hub client import: project
loading reads these too."""

from __future__ import annotations

import re

_NAME = r"[A-Za-z0-9][\w.-]*"


def is_owner(text: str) -> bool:
    return bool(re.fullmatch(_NAME, text)) and ".." not in text and "--" not in text


def is_repo_id(text: str) -> bool:
    """ORG/NAME."""
    owner, _, name = text.partition("/")
    return is_owner(owner) and is_owner(name)


def is_trust_entry(text: str) -> bool:
    """An owner (every repo of it) or one repo id."""
    return is_owner(text) or is_repo_id(text)
