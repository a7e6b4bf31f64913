"""Secret redaction. Every log line, error and artifact text passes through
`redact` before it leaves the process."""

from __future__ import annotations

import os
import re

_SECRET_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_API_TOKEN")
_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{20,}")
_extra: set[str] = set()


def register(secret: str | None) -> None:
    """Remember a secret obtained some other way (e.g. from the login cache)."""
    if secret and len(secret) >= 8:
        _extra.add(secret)


def _known() -> set[str]:
    values = {os.environ.get(name, "") for name in _SECRET_ENV} | _extra
    return {v for v in values if len(v) >= 8}


def redact(text: str) -> str:
    for secret in _known():
        text = text.replace(secret, "***")
    return _TOKEN_RE.sub("hf_***", text)
