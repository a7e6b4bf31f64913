"""User mistakes `publisher push` catches before talking to any Hub."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helper import run_cli

RMSNORM = Path(__file__).resolve().parents[1] / "kernel_projects" / "rmsnorm"


@pytest.mark.parametrize("repo_id", ["bad//id", "a/b..c", "no-namespace/", "org/na me"])
def test_invalid_repo_id_is_a_usage_error_without_traceback(repo_id):
    out = run_cli("push", repo_id, RMSNORM, "--dry-run",
                  env={"PATH": "/usr/bin:/bin", "HF_ENDPOINT": "http://127.0.0.1:1", "HOME": "/tmp"})
    assert out.returncode == 2, out.stderr
    assert "is not a Hub repo id" in out.stderr and "ORG/NAME" in out.stderr
    assert "Traceback" not in out.stderr
