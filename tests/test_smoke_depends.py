"""Test dependencies: declared as upstream does (flake.nix `pythonCheckInputs`),
installed into toolchain test environments, and into publisher's overlay where
the running interpreter runs the tests (never into that interpreter); an
undeclared import names the module and the fix. What upstream's test shells hold undeclared (its torch's own
dependencies) goes into toolchain environments too, and its absence from the
running interpreter is that environment's problem, not a failed kernel."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from publisher.host import host_platform
from publisher.plan.variants import Variant
from publisher.testing.environment import can_load
from publisher.testing.test_depends import declared_test_depends, implicit_requirement
from publisher.toolchains.probe import probe
from publisher.toolchains.provision import recorded_toolchains, uv_path

from cli_helper import run_cli
from smoke_fixtures import write_files

FLAKE = """\
{
  outputs = { self, kernel-builder }:
    kernel-builder.lib.genKernelFlakeOutputs {
      inherit self;
      path = ./.;
      # test dependencies, as kernel-builder documents them
      pythonCheckInputs = pkgs: with pkgs; [ termcolor torch ];
      pythonNativeCheckInputs = pkgs: with pkgs; [ cmake ];
    };
}
"""

TEST_USING_TERMCOLOR = """\
import termcolor
import torch
from kernels import get_kernel


def test_halve():
    k = get_kernel("publisher-test/halve", version=1)
    assert termcolor.colored('1', 'red') and torch.equal(k.halve(torch.ones(2)), torch.full((2,), 0.5))
"""


@pytest.mark.parametrize("text, expected", [
    (FLAKE, ("termcolor",)),
    ("pythonCheckInputs =\n  ps: [\n    ps.einops # for the reference\n    ps.pyyaml\n  ];\n", ("einops", "PyYAML")),
    ("pythonCheckInputs = pkgs: with pkgs; [ pytest ];\n", ()),
    ("# pythonCheckInputs = pkgs: with pkgs; [ numpy ];\n", ()),
], ids=["with-pkgs", "ps-dot", "only-provided", "commented-out"])
def test_flake_check_inputs_are_the_test_dependencies(tmp_path, text, expected):
    (tmp_path / "flake.nix").write_text(text)
    assert declared_test_depends(tmp_path) == expected


@pytest.mark.slow
def test_undeclared_import_names_the_module_and_the_fix(noarch_project, fresh_copy):
    project = fresh_copy(noarch_project)
    write_files(project, {"tests/test_halve.py": TEST_USING_TERMCOLOR})
    result = run_cli("test", str(project), "--json")
    assert result.returncode == 1
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    # nothing of the kernel ran: the test environment's problem, with where to declare it
    assert entry["status"] == "error"
    assert "module `termcolor` is not installed" in entry["reason"]
    assert "pythonCheckInputs" in entry["fix"] and "[dependency-groups] test" in entry["fix"]


def _absent_implicit_module() -> str:
    """A module kernel-builder's test shells hold undeclared that this interpreter lacks
    (a CPU torch from PyPI brings neither triton nor numpy)."""
    import importlib.util
    candidates = ("triton", "numpy", "requests")
    absent = [m for m in candidates if implicit_requirement(m) and importlib.util.find_spec(m) is None]
    if not absent:
        pytest.fail(f"this test needs an interpreter lacking one of {candidates}")
    return absent[0]


@pytest.mark.slow
def test_an_import_upstream_provides_undeclared_is_the_environments_problem(noarch_project, fresh_copy):
    # kernel-builder's torch carries numpy, pyyaml, requests (and triton off macOS) into its test shells, so
    # real projects import them without declaring them (kernels-community einops: numpy; gpt-oss-triton-kernels:
    # triton). Missing here, that is this environment's shortfall ("error", with the fix), not a failed kernel.
    module = _absent_implicit_module()
    project = fresh_copy(noarch_project)
    write_files(project, {"tests/test_halve.py": TEST_USING_TERMCOLOR.replace("import termcolor", f"import {module}")
                                                                     .replace("termcolor.colored('1', 'red') and ", "")})
    result = run_cli("test", str(project), "--json")
    assert result.returncode == 1
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "error", entry
    assert f"import `{module}`" in entry["reason"] and "kernel-builder" in entry["reason"]
    assert f"-m pip install {implicit_requirement(module)}" in entry["fix"]
    import importlib.util
    assert importlib.util.find_spec(module) is None  # the user's environment is left as it was


@pytest.mark.slow
def test_flake_declared_dependencies_are_installed_for_the_run_not_into_the_running_interpreter(
        noarch_project, fresh_copy):
    project = fresh_copy(noarch_project)
    write_files(project, {"tests/test_halve.py": TEST_USING_TERMCOLOR, "flake.nix": FLAKE})
    result = run_cli("test", str(project), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "passed" and entry["tests"]["passed"] == 1, entry
    import importlib.util
    assert importlib.util.find_spec("termcolor") is None  # the user's environment is left as it was


@pytest.mark.slow
def test_the_kernels_own_python_depends_are_installed_for_the_run_not_into_the_running_interpreter(tmp_path):
    # `kernels` refuses to load a variant whose python-depends are missing (kernels-community fla: einops)
    import importlib.util
    if importlib.util.find_spec("einops") is not None:
        pytest.fail("this test needs a running interpreter without einops")
    project = write_files(tmp_path / "halve", {
        "build.toml": '[general]\nname = "halve"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
                      'backends = ["cpu"]\npython-depends = ["einops"]\n\n[torch-noarch]\n',
        "torch-ext/halve/__init__.py": "import torch\n\n\ndef halve(x):\n    return x / 2\n",
        "tests/test_halve.py": TEST_USING_TERMCOLOR.replace("import termcolor\n", "")
                                                  .replace("termcolor.colored('1', 'red') and ", ""),
    })
    assert run_cli("build", str(project), "--local").returncode == 0
    result = run_cli("test", str(project), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "passed", entry
    assert importlib.util.find_spec("einops") is None  # the user's environment is left as it was


def _cuda_toolchain():
    return next((t for t in recorded_toolchains() if "cu" in t.key), None)


@pytest.mark.slow
def test_toolchain_test_environment_gets_the_dependencies(tmp_path):
    toolchain = _cuda_toolchain()
    if toolchain is None:
        pytest.skip("needs a CUDA toolchain environment made earlier by publisher (none recorded on this machine)")
    if can_load(Variant("torch-noarch", None, "cuda", None), probe(), host_platform()):
        # The running interpreter then tests torch-cuda itself (publisher never changes it: the test above);
        # the only variant left for a toolchain environment would be a compiled CUDA one (minutes of nvcc).
        pytest.skip("the running torch is a CUDA build: it tests torch-cuda itself, no toolchain environment does")
    python = str(toolchain.python)
    # termcolor: declared in flake.nix; numpy: what kernel-builder's test shells hold undeclared;
    # einops: the kernel's own python-depends
    has = lambda module: subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0  # noqa: E731
    for module in ("termcolor", "numpy", "einops"):
        if has(module):  # left by an earlier run: start from an environment without it
            subprocess.run([uv_path(), "pip", "uninstall", "--python", python, module], capture_output=True, check=True)
    project = write_files(tmp_path / "halve", {
        "build.toml": '[general]\nname = "halve"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
                      'backends = ["cpu", "cuda"]\npython-depends = ["einops"]\n\n[torch-noarch]\n',
        "torch-ext/halve/__init__.py": "import torch\n\n\ndef halve(x):\n    return x / 2\n",
        "tests/test_halve.py": TEST_USING_TERMCOLOR,
        "flake.nix": FLAKE,
    })
    assert run_cli("build", str(project), "--local").returncode == 0
    try:
        result = run_cli("test", str(project), "--variant", "torch-cuda", "--allow-load-only", "--json",
                               env=dict(os.environ))
        assert "Traceback" not in result.stderr, result.stderr
        assert has("termcolor") and has("numpy") and has("einops"), result.stdout + result.stderr
    finally:
        subprocess.run([uv_path(), "pip", "uninstall", "--python", python, "termcolor"], capture_output=True)


def test_a_toolchain_environment_is_used_when_an_undeclared_extra_cannot_be_installed(monkeypatch):
    # triton (what kernel-builder's CPU test shells hold on Linux) may have no wheel for some Python: the
    # variant is still tested, the install is a note, and a test importing triton says what is missing
    from types import SimpleNamespace

    from publisher.errors import ToolchainUnavailable
    from publisher.testing import environment
    from publisher.toolchains import provision

    variant = Variant.parse("torch212-cxx11-cpu-x86_64-linux")
    made = SimpleNamespace(key="torch212-cpu-x86_64-linux-0", python="/envs/t/bin/python", env_dir="/envs/t")
    installs: list[list[str]] = []

    def ensure_packages(toolchain, requirements, on_line):
        installs.append(list(requirements))
        if "triton" in requirements:
            raise ToolchainUnavailable("could not install triton: no matching distribution")

    monkeypatch.setattr(environment, "_this_interpreter", lambda: {})  # the running interpreter has no torch
    monkeypatch.setattr(environment, "host_platform", lambda: "x86_64-linux")
    monkeypatch.setattr(environment, "_probe", lambda python: {
        "torch_version": "2.12.0+cpu", "cuda": None, "hip": None, "xpu": None, "cxx11_abi": True})
    monkeypatch.setattr(provision, "recorded_toolchains", lambda: [made])
    monkeypatch.setattr(provision, "ensure_packages", ensure_packages)
    lines: list[str] = []
    env = environment.select_environment(variant, lambda: None, lines.append, ("termcolor",), ("einops",))
    assert env.python == made.python
    assert installs[0][-2:] == ["termcolor", "einops"] and "kernels" in " ".join(installs[0])
    assert "triton" in installs[1] and "numpy" in installs[1]
    assert any(line.startswith("note: could not install triton") for line in lines), lines
