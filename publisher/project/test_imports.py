"""PB409: the project's tests import a top-level module that nothing declares
(pyproject.toml `[dependency-groups] test`, publisher.toml `test-depends`,
flake.nix `pythonCheckInputs`, build.toml `python-depends`) and that is not
the kernel itself, the standard library, torch, the harness or what every
test environment holds. Such a test cannot be collected where the module is
missing, which `publisher test` reports as an error of the environment.
Read: the files `pytest tests` collects and the modules of tests/ they import
(a script there, run as `python tests/example.py`, is no test)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from publisher.codes import finding
from publisher.findings import Finding
from publisher.project import resources
from publisher.testing.test_depends import (
    DECLARE_HINT,
    always_present,
    declared_test_depends,
    needed_by,
    provided_modules,
    pypi_name,
)

MAX_FILES = 2000
_HARNESS = {"torch", "kernels", "pytest", "__future__"}
# the files `pytest tests` collects tests from (pytest's default python_files), and conftest.py
COLLECTED = re.compile(r"^(test_.*|.*_test)\.py$")


def collected(name: str) -> bool:
    return bool(COLLECTED.match(name)) or name == "conftest.py"


def _imports(tree: ast.Module) -> list[tuple[str, int]]:
    """(module, line) of every absolute import that runs when the test module is collected: at
    module or class level, outside `try` (an optional import) and functions (which import only
    when that test runs, and say so then). The module's full dotted name."""
    found: list[tuple[str, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.module, node.lineno))
            elif isinstance(node, ast.ClassDef):
                visit(node.body)
            elif isinstance(node, ast.If) and not _type_checking(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.With):
                visit(node.body)

    visit(tree.body)
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def check_test_imports(root: Path, python_name: str, python_depends: list[str], backends: list[str]) -> list[Finding]:
    tests = Path(root) / "tests"
    if not tests.is_dir():
        return []
    files = sorted(p for p in tests.rglob("*.py") if "__pycache__" not in p.parts)[:MAX_FILES]
    texts = {p: p.read_text(errors="replace") for p in files}
    first, through = undeclared_test_imports(root, texts, python_name, python_depends, backends)
    found = [
        finding("PB409", f"the tests import `{module}`, which nothing declares: where it is not installed they "
                f"cannot be collected", file=str(path), line=line, hint=DECLARE_HINT.format(req=pypi_name(module)))
        for module, (path, line) in sorted(first.items())
    ]
    return found + [
        finding("PB409", f"the tests import `{dotted}`, which imports `{module}`: its package does not install it, "
                "and nothing declares it: where it is not installed they cannot be collected", file=str(path),
                line=line, hint=DECLARE_HINT.format(req=pypi_name(module)))
        for module, (path, line, dotted) in sorted(through.items()) if module not in first
    ]


def undeclared_test_requirements(root: Path, texts: dict[Path, str], python_name: str, python_depends: list[str],
                                 backends: list[str]) -> list[str]:
    """The pip requirements for what PB409 reports of tests/ files given as texts (adopt's, before they are
    written), and what kernel-builder's test shells hold undeclared (numpy) but a user's torch may lack:
    each undeclared module's PyPI project, in order."""
    first, through = undeclared_test_imports(root, texts, python_name, python_depends, backends, implicit=False)
    return list(dict.fromkeys(pypi_name(m) for m in [*sorted(first), *sorted(through)]))


def undeclared_test_imports(root: Path, texts: dict[Path, str], python_name: str, python_depends: list[str],
                            backends: list[str], implicit: bool = True,
                            ) -> tuple[dict[str, tuple[Path, int]], dict[str, tuple[Path, int, str]]]:
    """Modules the tests/ files (path under root/tests -> text) import that nothing declares: {module: (file,
    line)}, and {module: (file, line, import)} for one an import needs (torch.testing._internal: expecttest);
    `implicit`: what kernel-builder's test shells hold undeclared (numpy) counts as declared."""
    tests = Path(root) / "tests"
    files = sorted(texts)[:MAX_FILES]
    declared = provided_modules(declared_test_depends(root))
    curated = {**resources.general_python_depends()}
    for backend in backends:
        curated.update(resources.backend_python_depends(backend))
    declared |= {curated[n].get("import", n.replace("-", "_")) for n in python_depends if n in curated}
    local = {p.stem for p in files} | {tests.name} | {d.name for p in files for d in p.relative_to(tests).parents
                                                      if d.name}
    known = set(sys.stdlib_module_names) | _HARNESS | local | declared | {python_name, f"{python_name}_ops"}
    first: dict[str, tuple[Path, int]] = {}
    through: dict[str, tuple[Path, int, str]] = {}
    by_stem = {p.stem: p for p in files}
    pending = [p for p in files if collected(p.name)]  # what pytest collects, and the modules it imports
    read: set[Path] = set(pending)
    while pending:
        path = pending.pop(0)
        try:
            tree = ast.parse(texts[path], filename=str(path))
        except (SyntaxError, ValueError):
            continue
        for dotted, line in _imports(tree):
            module = dotted.split(".")[0]
            if module in by_stem and by_stem[module] not in read:
                read.add(by_stem[module])
                pending.append(by_stem[module])
            for needed in needed_by(dotted):
                if needed not in known and not always_present(needed, implicit):
                    through.setdefault(needed, (path, line, dotted))
            if module in known or module.startswith("_") or always_present(module, implicit):
                continue
            first.setdefault(module, (path, line))
    return first, {m: v for m, v in through.items() if m not in first}
