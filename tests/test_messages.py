"""Every message names only what the user has: no string publisher can show (errors, hints,
help, generated files, the skill it installs) points at a folder of publisher's own repository
(scripts/, kernel_projects/, matrices/), which a pip-installed publisher does not have.
Docstrings and comments are for publisher's developers and are not scanned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "publisher"
REPO_ONLY = re.compile(r"(?<![\w/.])(scripts|kernel_projects|matrices)/")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _hits() -> list[str]:
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                    and REPO_ONLY.search(node.value)):
                hits.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value[:80]!r}")
    for path in sorted([*PACKAGE.rglob("*.j2"), *PACKAGE.rglob("*.md")]):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if REPO_ONLY.search(line):
                hits.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line[:80]!r}")
    return hits


def test_no_message_names_a_folder_of_publishers_repository():
    assert _hits() == []


def test_the_scan_finds_such_a_message(tmp_path, monkeypatch):
    (tmp_path / "mod.py").write_text('"""docstring: scripts/gpu_test.sh is fine here"""\n'
                                     'HINT = "run scripts/gpu_test.sh"\n')
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert _hits() == [f"{tmp_path.name}/mod.py:2: 'run scripts/gpu_test.sh'"]
