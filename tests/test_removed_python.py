"""torch Python modules torch removed (torch._six, gone in torch 2.0) in a
kernel's Python: the table's example really fails under the installed torch
and runs once ported; `check` reports each use at its file and line (PB601
where no torch of the matrix has the module), `migrate --sources` ports the
exact ones, and `adopt` ports the Python it carries (maskrcnn-benchmark's
`torch._six.PY3`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from publisher.project.load import load_project
from publisher.project.removed_python import modules, port_python, scan_python
from publisher.project.versions import version_key

from adopt_fixtures import write_setup_project
from cli_helper import run_cli

ROOT = Path(__file__).resolve().parents[1]
TORCH = torch.__version__.split("+")[0]

COMPAT = textwrap.dedent('''\
    """Compatibility names."""
    import torch
    from torch._six import string_classes, inf as INF  # py2/3

    try:
        from torch._six import container_abcs
    except ImportError:
        import collections.abc as container_abcs

    NOTE = "torch._six.PY3 is only mentioned here"  # torch._six.PY2 too


    def is_name(x):
        if torch._six.PY3:
            return isinstance(x, string_classes) and INF > 0 and container_abcs is not None
        return False
    ''')


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "mod.py"
    path.write_text(code)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("removed", modules(), ids=lambda m: m.id)
def test_the_table_agrees_with_the_installed_torch(removed, tmp_path):
    """The example fails exactly where the table says the module is gone, and the port of it runs."""
    assert removed.exact.example
    before = _run(removed.exact.example, tmp_path)
    gone = version_key(TORCH) >= version_key(removed.exact.removed_in)
    assert (before.returncode != 0) == gone, before.stderr
    if gone:
        assert "_six" in before.stderr
    ported = port_python(removed.exact.example, "mod.py")
    assert ported.ported and not ported.left
    after = _run(ported.text, tmp_path)
    assert after.returncode == 0, ported.text + after.stderr


def test_the_port_replaces_each_exact_use_and_adds_the_imports_it_needs(tmp_path):
    ported = port_python(COMPAT, "compat.py")
    text = ported.text
    assert "string_classes, INF = str, math.inf  # py2/3" in text
    assert "    container_abcs = collections.abc\n" in text  # inside the try block, indentation kept
    assert "if True:" in text
    assert NOTE_LINE in text and "_six" not in text.replace(NOTE_LINE, "")  # strings and comments are not uses
    assert text.index("import math\n") < text.index("INF = ") and text.index("import collections.abc\n") < text.index(
        "container_abcs = collections.abc")
    assert [u.line for u in ported.ported] == [3, 6, 14] and not ported.left
    module = tmp_path / "compat.py"
    module.write_text(text)
    done = subprocess.run([sys.executable, "-c", "import compat; assert compat.is_name('x') and not compat.is_name(1)"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


NOTE_LINE = 'NOTE = "torch._six.PY3 is only mentioned here"  # torch._six.PY2 too'


def test_what_has_no_exact_replacement_is_left_and_keeps_its_import():
    code = "import torch\nimport torch._six\nfrom torch import _six as six\n\nx = torch._six.FileNotFoundError\ny = six.PY3\n"
    ported = port_python(code, "m.py")
    assert [u.text for u in ported.left] == ["import torch._six", "from torch import _six as six",
                                             "torch._six.FileNotFoundError"]
    assert "y = True" in ported.text  # the exact one is still ported
    # once nothing else uses the module, importing it goes too (it fails on every torch that removed it)
    clean = port_python("import torch._six\nimport torch as th\n\nprint(th._six.PY3, torch.ones(1))\n", "n.py")
    assert clean.text == "import torch\nimport torch as th\n\nprint(True, torch.ones(1))\n" and not clean.left
    assert scan_python("def f(:\n", "bad.py") == []  # a file that does not parse is left alone


def _kernel_with_compat(root: Path) -> Path:
    shutil.copytree(ROOT / "kernel_projects" / "rmsnorm", root,
                    ignore=shutil.ignore_patterns("build", "result", "__pycache__"))
    (root / "torch-ext/rmsnorm/compat.py").write_text(COMPAT)
    return root


def test_check_reports_each_use_in_the_kernels_package_at_its_line(tmp_path):
    root = _kernel_with_compat(tmp_path / "rmsnorm")
    _, findings = load_project(root)
    uses = [(Path(f.file).name, f.line, f.code) for f in findings if f.code.startswith("PB6")]
    assert uses == [("compat.py", 3, "PB601"), ("compat.py", 6, "PB601"), ("compat.py", 14, "PB601")]
    first = next(f for f in findings if f.code == "PB601")
    assert "uses torch._six" in first.message and "removed in torch 2.0" in first.message
    assert "does not have it" in first.message or "has it" in first.message
    assert "string_classes -> str" in first.hint and "migrate --sources" in first.hint


def test_migrate_sources_ports_the_kernels_python_and_check_is_then_clean(tmp_path):
    root = _kernel_with_compat(tmp_path / "rmsnorm")
    shown = run_cli("migrate", str(root), "--sources", "--diff")
    assert (root / "torch-ext/rmsnorm/compat.py").read_text() == COMPAT  # --diff writes nothing
    assert "+string_classes, INF = str, math.inf  # py2/3" in shown.stdout
    assert "would port 3 use(s) of removed torch Python APIs in 1 source(s)" in shown.stdout
    done = run_cli("migrate", str(root), "--sources")
    assert done.returncode == 0, done.output
    assert "torch._six" not in (root / "torch-ext/rmsnorm/compat.py").read_text().replace(NOTE_LINE, "")
    _, findings = load_project(root)
    assert not [f for f in findings if f.code.startswith("PB6")]


def test_adopt_ports_the_python_it_carries(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    (root / "mini_ops/compat.py").write_text(COMPAT)
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    report = json.loads(done.stdout)
    carried = (root / "torch-ext/mini_ops/compat.py").read_text()
    assert "string_classes, INF = str, math.inf" in carried and "if True:" in carried
    assert any(f["code"] == "PA181" and "torch._six" in f["message"] for f in report["findings"])
    assert (root / "mini_ops/compat.py").read_text() == COMPAT  # the author's own file is not touched
