"""What the Hub accepts as an owner (user or org) and a kernel repo id: the one
rule check (build.toml's repo-ids, hub-cache-trust), build, push and our Hub
server use, checked before any call so that a typo is a clear usage error.

The Hub's own rule is huggingface_hub's `validate_repo_id` (ASCII letters,
digits, `-_.`; no `--` or `..`; no leading/trailing `-`/`.`; no `.git` suffix;
96 characters a part). `kernels` adds one thing: a repo id names an owner,
since `get_kernel` checks that owner's trust before anything else."""

from __future__ import annotations

import re

_ASCII = re.compile(r"[A-Za-z0-9_./-]*")  # the Hub's charset; Python's \w would also pass other letters


def _hub_problem(text: str) -> str | None:
    if not _ASCII.fullmatch(text):
        return "it may use only ASCII letters, digits, `-`, `_` and `.`"
    # Imported here: huggingface_hub.utils pulls in its HTTP stack (~0.1 s), needed only for a name
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError as err:
        return str(err).split(":", 1)[0].rstrip(".")
    return None


def repo_id_problem(text: object) -> str | None:
    """Why `text` is not a kernel repo id, or None when it is one."""
    if not isinstance(text, str) or text.count("/") != 1:
        return "it must be `<org>/<name>`"
    return _hub_problem(text)


def is_repo_id(text: object) -> bool:
    return repo_id_problem(text) is None


def is_owner(text: object) -> bool:
    return isinstance(text, str) and "/" not in text and _hub_problem(text) is None


def is_trust_entry(text: object) -> bool:
    """An owner (every repo of it) or one repo id."""
    return is_owner(text) or is_repo_id(text)
