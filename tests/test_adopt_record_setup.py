"""setup.py run with recorders (publisher/adopt/record_setup.py) under any
interpreter layout: a virtual environment made from another one whose site
is extended by a `.pth` file (nothing imported at startup, as on the GPU
machine's Python), a project holding a module named like a standard-library
one; and every failure to run a setup.py is a finding naming what the
script needed, never an ImportError from inside the recorder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from publisher.adopt.discover import SetupNotRun, discover

from adopt_fixtures import write
from cli_helper import run_cli

# needs running: the extension list depends on what torch answers
SETUP = """\
import torch
from setuptools import setup
from torch.utils.cpp_extension import CppExtension, BuildExtension

sources = ["lib.cpp"] + (["extra.cpp"] if not torch.cuda.is_available() else [])
setup(name="plain", ext_modules=[CppExtension("plain_ext", sources)], cmdclass={"build_ext": BuildExtension})
"""
BINDING = "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n"


@pytest.fixture(scope="module")
def venv_of_venv(tmp_path_factory) -> Path:
    """python -m venv from inside a venv, with no pip and no site packages of its own: the base interpreter's
    site-packages (setuptools) reach it through a `.pth` line, which imports nothing at startup."""
    root = tmp_path_factory.mktemp("interpreters")
    first, second = root / "first", root / "second"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(first)], check=True)
    subprocess.run([str(first / "bin" / "python"), "-m", "venv", "--without-pip", str(second)], check=True)
    base_site = subprocess.run([sys.executable, "-c", "import setuptools, os; print(os.path.dirname(os.path.dirname("
                                "setuptools.__file__)))"], capture_output=True, text=True, check=True).stdout.strip()
    purelib = subprocess.run([str(second / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "base.pth").write_text(base_site + "\n")
    return second / "bin" / "python"


def test_a_venv_of_a_venv_runs_setup_py_with_recorders(tmp_path, venv_of_venv, monkeypatch):
    root = write(tmp_path / "plain", {"setup.py": SETUP, "lib.cpp": BINDING})
    monkeypatch.setattr(sys, "executable", str(venv_of_venv))
    found = discover(root)
    assert found.how == "executed" and [e.module for e in found.extensions] == ["plain_ext"]


def test_a_project_module_named_like_a_standard_library_module_does_not_break_the_recorder(
        tmp_path, venv_of_venv, monkeypatch):
    root = write(tmp_path / "shadowing", {"setup.py": SETUP, "lib.cpp": BINDING, "types.py": "TYPES = 1\n",
                                          "json.py": "JSON = 1\n"})
    monkeypatch.setattr(sys, "executable", str(venv_of_venv))
    found = discover(root)
    assert [e.module for e in found.extensions] == ["plain_ext"]


def test_a_module_setup_py_needs_and_this_python_lacks_is_a_finding_naming_it(tmp_path, venv_of_venv, monkeypatch):
    root = write(tmp_path / "needs", {"setup.py": "import os\nimport pybind11_stubgen_missing\n" + SETUP,
                                      "lib.cpp": BINDING})
    monkeypatch.setattr(sys, "executable", str(venv_of_venv))
    with pytest.raises(SetupNotRun) as refused:
        discover(root)
    (needed,) = [f for f in refused.value.findings if f.code == "PA106"]
    assert "`pybind11_stubgen_missing`" in needed.message and str(venv_of_venv) in needed.message
    assert needed.file == str(root / "setup.py") and needed.line == 2


def test_a_project_file_shadowing_the_standard_library_is_named_when_setup_py_fails(tmp_path):
    # the project's own colorsys.py is first on sys.path where setup.py runs (as under `python setup.py`):
    # setup.py's `import colorsys` finds it instead of the standard library's
    root = write(tmp_path / "shadow", {"setup.py": "import os\nimport colorsys\ncolorsys.rgb_to_hls(0, 0, 0)\n" + SETUP,
                                       "colorsys.py": "PALETTE = []\n", "lib.cpp": BINDING})
    with pytest.raises(SetupNotRun) as refused:
        discover(root)
    codes = {f.code: f for f in refused.value.findings}
    assert codes["PA107"].file == str(root / "colorsys.py") and "`colorsys`" in codes["PA107"].message
    assert codes["PA106"].line == 3 and "rgb_to_hls" in codes["PA106"].message


def test_the_cli_shows_the_findings_and_writes_nothing(tmp_path):
    root = write(tmp_path / "cli", {"setup.py": "import os\nimport not_installed_anywhere\n" + SETUP, "lib.cpp": BINDING})
    done = run_cli("adopt", str(root), "--json")
    assert done.returncode == 1
    assert "PA106" in done.stdout and "not_installed_anywhere" in done.stdout and "Traceback" not in done.output
    assert sorted(p.name for p in root.iterdir()) == ["lib.cpp", "setup.py"]



# A version from the checkout, as many setup.py scripts ask git at import; the sources listed by the script
# (which the static reader cannot follow, so the script is run)
GIT_VERSION_SETUP = """\
import os
import subprocess
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
sha = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=here).decode().strip()
described = os.popen("git describe --always").read().strip()
assert sha and described, "no version from git"
sources = sorted(f for f in os.listdir(here) if f.endswith(".cpp"))
setup(name="gitver", version="0.1+" + sha, ext_modules=[CppExtension("gitver_ext", sources)],
      cmdclass={"build_ext": BuildExtension})
"""


def _commit(root: Path) -> str:
    git = ["git", "-c", "user.email=a@example.com", "-c", "user.name=a", "-C", str(root)]
    subprocess.run([*git[:-2], "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_setup_py_asking_git_for_its_version_is_answered_from_the_projects_repository(tmp_path):
    root = write(tmp_path / "gitver", {"setup.py": GIT_VERSION_SETUP, "lib.cpp": BINDING})
    sha = _commit(root)
    found = discover(root)
    assert [e.module for e in found.extensions] == ["gitver_ext"] and found.how == "executed"
    asked = [f for f in found.findings if f.code == "PA109"]
    assert asked and "git rev-parse --short HEAD" in asked[0].message and "git describe" in asked[0].message
    assert not [f for f in found.findings if f.code == "PA104"], found.findings
    # read only: the author's index is as it was
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == "" and sha


REFUSED_SETUP = """\
import subprocess
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

try:
    caps = subprocess.check_output(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv"])
    ext_modules = [CppExtension("probed_ext", ["lib.cpp"])]
except Exception:
    ext_modules = []
setup(name="probed", ext_modules=ext_modules, cmdclass={"build_ext": BuildExtension})
"""


def test_no_extension_after_a_refused_command_names_the_refusal_and_its_line(tmp_path):
    root = write(tmp_path / "probed", {"setup.py": REFUSED_SETUP, "lib.cpp": BINDING})
    done = run_cli("adopt", str(root), "--dry-run")
    assert done.returncode != 0
    assert "setup.py:6: run with recorders, it declared no extension after publisher refused " \
           "subprocess.check_output: nvidia-smi" in done.output, done.output
    assert "declares no CUDAExtension" not in done.output


def test_a_shell_line_starting_with_git_that_could_run_more_is_refused(tmp_path):
    """Only git itself is answered: `git rev-parse HEAD; touch X` through a shell would run `touch` too."""
    setup = GIT_VERSION_SETUP.replace(
        'described = os.popen("git describe --always").read().strip()',
        'try:\n    described = os.popen("git describe --always; touch " + os.path.join(here, "RAN")).read()\n'
        'except OSError:\n    described = "refused"')
    root = write(tmp_path / "gitver", {"setup.py": setup, "lib.cpp": BINDING})
    _commit(root)
    found = discover(root)
    assert [e.module for e in found.extensions] == ["gitver_ext"]
    assert any(f.code == "PA104" and "os.popen" in f.message for f in found.findings), found.findings
    assert not (root / "RAN").exists()
