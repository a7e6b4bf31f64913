"""The project's own tests, wherever they live, and where adopt carries them:
kernel-builder's CI and `publisher test` run `pytest tests`, so tests/ is
where a kernel's tests are. Found: everything under tests/ (kept where it
is), under test/ (carried to tests/), and the test modules beside setup.py
(`test_*.py`, `*_test.py`, `test.py`/`tests.py`, any module with a
unittest.TestCase class), with the project's own modules they import (a
reference implementation in `utils.py`). A file named like a test that
defines no test (a script run as `python test.py`) is not a test: pytest
would collect nothing from it; nor is a file of tests/ that `pytest tests`
does not collect (longcw/RoIAlign.pytorch's tests/test.py, run as a script)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from publisher.adopt import sources
from publisher.project.test_imports import COLLECTED

_TEST_NAME = re.compile(r"^(test_.*|.*_test|tests?)\.py$")
# data files a test folder carries (text: adopt writes text); other files are named in a finding
_TEXT_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".txt", ".csv", ".toml", ".cfg", ".ini")


@dataclass(frozen=True)
class ProjectTest:
    source: str  # relative to the project root
    target: str  # under tests/
    helper: bool = False  # a module of the project the tests import, not a test


def _tree(root: Path, rel: str) -> ast.Module | None:
    text = sources.read_text(root / rel)
    try:
        return ast.parse(text) if text is not None else None
    except (SyntaxError, ValueError):
        return None


def defines_tests(tree: ast.Module) -> bool:
    """pytest collects something from it: a `test...` function, a `Test...` class or a unittest.TestCase."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            return True
        if isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_test_case(node)):
            return True
    return False


def _is_test_case(node: ast.ClassDef) -> bool:
    return any((ast.unparse(b).rpartition(".")[2]) == "TestCase" for b in node.bases)


def _target(name: str) -> str:
    """Where a module beside setup.py goes under tests/: under a name pytest collects."""
    stem = PurePosixPath(name).stem
    return f"tests/{name}" if re.match(r"^(test_.*|.*_test)$", stem) else f"tests/test_{stem}.py"


def find(root: Path, leave: set[str] = frozenset()) -> tuple[list[ProjectTest], list[str]]:
    """The project's tests and where each goes; and the files of a test folder that are not carried (binary
    data). `leave`: modules carried into the package, which the tests import from there (not carried as
    helpers)."""
    found: list[ProjectTest] = []
    left: list[str] = []
    if (root / "tests").is_dir():
        for rel in sources.walk(root / "tests", (".py",)):
            tree = _tree(root, f"tests/{rel}")
            name = PurePosixPath(rel).name
            test = COLLECTED.match(name) is not None and tree is not None and defines_tests(tree)
            found.append(ProjectTest(f"tests/{rel}", f"tests/{rel}", helper=not test))
    if (root / "test").is_dir():
        for rel in sources.walk(root / "test", ("",)):
            if rel.endswith(_TEXT_SUFFIXES) and sources.read_text(root / "test" / rel) is not None:
                tree = _tree(root, f"test/{rel}") if rel.endswith(".py") else None
                found.append(ProjectTest(f"test/{rel}", f"tests/{rel}", helper=tree is None or not defines_tests(tree)))
            else:
                left.append(f"test/{rel}")
    taken = {t.target for t in found}
    beside = []
    for path in sorted(root.glob("*.py")):
        rel = path.name
        if rel in ("setup.py", "conftest.py"):
            continue  # a module carried into the package (`leave`) that also defines a TestCase is a test too
        tree = _tree(root, rel)
        if tree is None or not defines_tests(tree):
            continue
        if _TEST_NAME.match(rel) or any(isinstance(n, ast.ClassDef) and _is_test_case(n) for n in tree.body):
            target = _target(rel)
            if target not in taken:
                beside.append(ProjectTest(rel, target))
                taken.add(target)
    if beside and (root / "conftest.py").is_file() and "tests/conftest.py" not in taken:
        beside.append(ProjectTest("conftest.py", "tests/conftest.py", helper=True))
    found += beside
    found += _helpers(root, beside, leave | {t.source for t in found}, taken)
    return found, left


def _helpers(root: Path, tests: list[ProjectTest], leave: set[str], taken: set[str]) -> list[ProjectTest]:
    """The modules beside setup.py that the tests carried from there import (`from utils import knn_ref`),
    carried with them so that the same import finds them in tests/."""
    out: list[ProjectTest] = []
    pending = [t.source for t in tests]
    seen: set[str] = set()
    while pending:
        tree = _tree(root, pending.pop())
        for name in _imported(tree) if tree is not None else ():
            rel = f"{name}.py"
            if rel in seen or rel in leave or not (root / rel).is_file() or f"tests/{rel}" in taken:
                continue
            seen.add(rel)
            out.append(ProjectTest(rel, f"tests/{rel}", helper=True))
            pending.append(rel)
    return out


def _imported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names if "." not in a.name}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and "." not in node.module:
            names.add(node.module)
    return names
