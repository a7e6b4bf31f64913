"""The one repo-id rule, shared by check (build.toml's repo-ids), build and push.

The Hub's own rule is huggingface_hub's `validate_repo_id` (ASCII letters,
digits, `-_.`; no `--` or `..`; no leading/trailing `-`/`.`; no `.git` suffix;
96 characters a part). `kernels` adds one thing: the id must name an org,
since `get_kernel` checks that org's trust before anything else."""

from __future__ import annotations

import re

from huggingface_hub.utils import HFValidationError, validate_repo_id

_ASCII = re.compile(r"[A-Za-z0-9_./-]*")  # the Hub's charset; Python's \w would also pass other letters


def repo_id_problem(text: object) -> str | None:
    """Why `text` is not a kernel repo id, or None when it is one."""
    if not isinstance(text, str) or text.count("/") != 1:
        return "it must be `<org>/<name>`"
    if not _ASCII.fullmatch(text):
        return "it may use only ASCII letters, digits, `-`, `_` and `.`"
    try:
        validate_repo_id(text)
    except HFValidationError as err:
        return str(err).split(":", 1)[0].rstrip(".")
    return None

