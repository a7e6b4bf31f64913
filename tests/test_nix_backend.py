"""The Nix backend against real `nix`, with flakes made here (no inputs, so
they evaluate and build offline) that expose kernel-builder's attributes:
`redistributable.<variant>` and `bundle`, each output holding `<variant>/`."""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from publisher.backends.nix import NixBackend
from publisher.builder.backend import BuildOptions, BuildRequest
from publisher.builder.metadata import read_metadata
from publisher.errors import BuildFailed, EnvironmentProblem, ProjectError, ToolchainUnavailable
from publisher.plan.planner import PlannedVariant
from publisher.plan.variants import Variant
from publisher.project.load import load_project
from publisher.toolchains.spec import ToolchainSpec

from cli_helper import run_cli

REPO = Path(__file__).resolve().parents[1]
SYSTEM = {"x86_64": "x86_64-linux", "aarch64": "aarch64-linux"}.get(platform.machine(), "x86_64-linux")


def _nix_usable() -> str | None:
    if shutil.which("nix") is None:
        return "nix is not installed (CI installs it with .ci/setup-nix.sh)"
    probe = subprocess.run(["nix", "eval", "--expr", "builtins ? getFlake"], capture_output=True, text=True)
    if probe.stdout.strip() != "true":
        return "nix flakes are not enabled (run .ci/setup-nix.sh)"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.nix,
              pytest.mark.skipif(_nix_usable() is not None, reason=str(_nix_usable()))]

BUILD_TOML = """
[general]
name = "nixdemo"
version = 1
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch-noarch]

[kernel]
"""

# Shared by the project flake and the fake kernel-builder: one derivation per
# variant, written with /bin/sh only (no nixpkgs), like kernel-builder's
# outputs: $out/<variant>/{__init__.py,metadata.json}.
NIX_LIB = r"""
  mkVariant = system: kname: variant: fail: derivation {
    name = variant;
    inherit system;
    builder = "/bin/sh";
    PATH = "/usr/bin:/bin";
    nonce = "@NONCE@";  # fresh derivations per test: the store keeps old results
    initPy = ''@INIT_PY@'';
    metadata = builtins.toJSON {
      name = kname; id = "_nixdemo_cpu_0123abc"; version = 1; license = "Apache-2.0";
      python-depends = []; backend = { type = "cpu"; archs = []; };
      digest = { algorithm = "sha256"; files = { "__init__.py" = "@INIT_DIGEST@"; }; };
    };
    args = [ "-c" (''
      echo "compiling ${variant} step 1"
      echo "compiling ${variant} step 2"
    '' + (if fail then ''
      echo "error: kaboom in ${variant}.cu" >&2
      exit 1
    '' else ''
      mkdir -p $out/${variant}
      printf '%s' "$initPy" > $out/${variant}/__init__.py
      printf '%s' "$metadata" > $out/${variant}/metadata.json
    '')) ];
  };
  mkBundle = system: parts: derivation {
    name = "bundle";
    inherit system;
    builder = "/bin/sh";
    PATH = "/usr/bin:/bin";
    nonce = "@NONCE@";
    args = [ "-c" ("echo bundling; mkdir -p $out; " + builtins.concatStringsSep "; " (map (p: "cp -r ${p}/* $out/") parts)) ];
  };
"""

PROJECT_FLAKE = """
{
  outputs = { self }:
    let
      system = "@SYSTEM@";
      @LIB@
      cpu = mkVariant system "nixdemo" "torch-cpu" false;
      xpu = mkVariant system "nixdemo" "torch-xpu" false;
    in {
      packages.${system} = {
        redistributable = {
          torch-cpu = cpu;
          torch-xpu = xpu;
          torch-cuda = mkVariant system "nixdemo" "torch-cuda" true;
        };
        bundle = mkBundle system [ cpu xpu ];
      };
    };
}
"""

# A stand-in for kernel-builder's flake, offline: the same `lib` entry point.
FAKE_KERNEL_BUILDER = """
{
  outputs = { self }:
    let
      @LIB@
    in {
      lib.genKernelFlakeOutputs = { self, path }:
        let
          system = "@SYSTEM@";
          toml = builtins.fromTOML (builtins.readFile (path + "/build.toml"));
          cpu = mkVariant system toml.general.name "torch-cpu" false;
        in {
          packages.${system} = {
            redistributable.torch-cpu = cpu;
            bundle = mkBundle system [ cpu ];
          };
        };
    };
}
"""


INIT_PY = "def scale(x):\n    return 3 * x\n"


def _fill(template: str) -> str:
    digest = base64.b64encode(hashlib.sha256(INIT_PY.encode()).digest()).decode()
    lib = NIX_LIB.replace("@INIT_PY@", INIT_PY).replace("@INIT_DIGEST@", digest)
    return template.replace("@LIB@", lib).replace("@SYSTEM@", SYSTEM).replace("@NONCE@", uuid.uuid4().hex)


def _project(tmp_path: Path, flake: str | None = PROJECT_FLAKE) -> Path:
    root = tmp_path / "nixdemo"
    (root / "torch-ext" / "nixdemo").mkdir(parents=True)
    (root / "torch-ext" / "nixdemo" / "__init__.py").write_text("")
    (root / "build.toml").write_text(BUILD_TOML)
    if flake is not None:
        (root / "flake.nix").write_text(_fill(flake))
    return root


def _request(root: Path, tmp_path: Path, variant: str) -> BuildRequest:
    project, _ = load_project(root)
    planned = PlannedVariant(
        variant=Variant.parse(variant),
        toolchain=ToolchainSpec("2.12", "cpu", SYSTEM, None, "torch==2.12.*"),
        required=False,
    )
    stage = tmp_path / "staging" / variant
    stage.mkdir(parents=True)
    (tmp_path / "work").mkdir(exist_ok=True)
    return BuildRequest(project, planned, stage, tmp_path / f"{variant}.log", tmp_path / "work", BuildOptions(cores=2))


def _backend(root: Path, **kw) -> NixBackend:
    project, _ = load_project(root)
    backend = NixBackend(project, **kw)
    backend.check_environment()
    return backend


def test_builds_only_the_selected_attribute_and_collects_the_variant(tmp_path):
    root = _project(tmp_path)
    backend = _backend(root)
    request = _request(root, tmp_path, "torch-cpu")
    lines: list[str] = []
    try:
        backend.build(request, lines.append)
    finally:
        backend.close()

    # Only redistributable.torch-cpu was built: torch-cuda (which fails) and
    # torch-xpu were not touched.
    assert any("torch-cpu> compiling torch-cpu step 1" in line for line in lines)
    assert not any("torch-cuda" in line or "torch-xpu" in line for line in lines)
    assert sorted(p.name for p in request.stage_dir.iterdir()) == ["__init__.py", "metadata.json"]
    assert read_metadata(request.stage_dir)["name"] == "nixdemo"
    # Copied out of the read-only store, the files are ours to change.
    (request.stage_dir / "__init__.py").write_text((request.stage_dir / "__init__.py").read_text())

    import kernels

    module = kernels.get_local_kernel(request.stage_dir.parent, backend="cpu")
    assert module.scale(7) == 21


def test_streams_the_build_log_line_by_line_and_to_the_log_file(tmp_path):
    root = _project(tmp_path)
    backend = _backend(root)
    request = _request(root, tmp_path, "torch-xpu")
    lines: list[str] = []
    try:
        backend.build(request, lines.append)
    finally:
        backend.close()
    steps = [line for line in lines if "compiling torch-xpu" in line]
    assert steps == ["torch-xpu> compiling torch-xpu step 1", "torch-xpu> compiling torch-xpu step 2"]
    log = request.log.read_text()
    assert "$ nix build" in log and "#redistributable.torch-xpu" in log and "-L" in log
    assert "torch-xpu> compiling torch-xpu step 2" in log


def test_a_variant_the_flake_does_not_build_is_unavailable_with_the_list(tmp_path):
    root = _project(tmp_path)
    backend = _backend(root)
    try:
        with pytest.raises(ToolchainUnavailable) as err:
            backend.build(_request(root, tmp_path, "torch-metal"), lambda line: None)
    finally:
        backend.close()
    assert "does not build torch-metal" in err.value.reason
    assert "torch-cpu, torch-cuda, torch-xpu" in err.value.reason


def test_a_failing_derivation_fails_the_variant_with_its_error_and_stages_nothing(tmp_path):
    root = _project(tmp_path)
    backend = _backend(root)
    request = _request(root, tmp_path, "torch-cuda")
    lines: list[str] = []
    try:
        with pytest.raises(BuildFailed) as err:
            backend.build(request, lines.append)
    finally:
        backend.close()
    assert "kaboom in torch-cuda.cu" in err.value.first_error
    assert any("torch-cuda> compiling torch-cuda step 2" in line for line in lines)
    assert list(request.stage_dir.iterdir()) == []


def test_bundle_mode_builds_the_bundle_once_for_every_variant(tmp_path):
    root = _project(tmp_path)
    backend = _backend(root, bundle=True)
    first, second = _request(root, tmp_path, "torch-cpu"), _request(root, tmp_path, "torch-xpu")
    lines: list[str] = []
    try:
        backend.build(first, lines.append)
        backend.build(second, lines.append)
    finally:
        backend.close()
    assert sum("bundle> bundling" in line for line in lines) == 1
    assert "$ nix build" in first.log.read_text() and "#bundle" in first.log.read_text()
    assert "$ nix build" not in second.log.read_text() and "from the bundle" in second.log.read_text()
    for request in (first, second):
        assert read_metadata(request.stage_dir)["id"] == "_nixdemo_cpu_0123abc"


def test_a_project_without_flake_uses_the_template_around_the_project(tmp_path):
    kernel_builder = tmp_path / "kernel-builder"
    kernel_builder.mkdir()
    (kernel_builder / "flake.nix").write_text(_fill(FAKE_KERNEL_BUILDER))
    root = _project(tmp_path, flake=None)
    backend = _backend(root, kernel_builder=f"path:{kernel_builder}")
    request = _request(root, tmp_path, "torch-cpu")
    try:
        backend.build(request, lambda line: None)
    finally:
        backend.close()
    # The fake kernel-builder read the project's build.toml through the template.
    assert read_metadata(request.stage_dir)["name"] == "nixdemo"
    assert "no flake.nix" in request.log.read_text()
    assert not (root / "flake.nix").exists() and not (root / "flake.lock").exists()


def test_the_author_template_in_nix_folder_builds_when_copied_into_a_project(tmp_path):
    kernel_builder = tmp_path / "kernel-builder"
    kernel_builder.mkdir()
    (kernel_builder / "flake.nix").write_text(_fill(FAKE_KERNEL_BUILDER))
    root = _project(tmp_path, flake=None)
    shutil.copy(REPO / "nix" / "flake.nix", root / "flake.nix")
    backend = _backend(root, kernel_builder=f"path:{kernel_builder}")
    request = _request(root, tmp_path, "torch-cpu")
    try:
        backend.build(request, lambda line: None)
    finally:
        backend.close()
    assert read_metadata(request.stage_dir)["name"] == "nixdemo"
    assert not (root / "flake.lock").exists()  # the project is not modified


def test_publisher_build_with_the_nix_backend_builds_validates_and_keeps_going(tmp_path):
    root = _project(tmp_path)
    result = run_cli("build", root, "--backend", "nix", "--json")
    assert result.returncode == 1, result.stderr  # torch-cuda's derivation fails on purpose
    states = {v["variant"]: v for v in json.loads(result.stdout)["variants"]}
    assert states["torch-cpu"]["state"] == "built" and states["torch-cpu"]["backend"] == "nix"
    assert states["torch-cuda"]["state"] == "failed" and "kaboom" in states["torch-cuda"]["error"]
    assert sorted(p.name for p in (root / "build").iterdir() if not p.name.startswith(".")) == ["torch-cpu"]
    assert "torch-cpu> compiling torch-cpu step 2" in Path(states["torch-cpu"]["log"]).read_text()


def test_a_flake_git_does_not_track_is_refused_with_the_fix(tmp_path):
    root = _project(tmp_path)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    project, _ = load_project(root)
    with pytest.raises(ProjectError) as err:
        NixBackend(project).check_environment()
    assert "flake.nix: not tracked by git" in err.value.message
    assert "git -C" in err.value.hint and "add flake.nix" in err.value.hint


def test_missing_nix_says_what_to_install(tmp_path):
    project, _ = load_project(_project(tmp_path))
    with pytest.raises(EnvironmentProblem) as err:
        NixBackend(project, nix="nix-not-installed-here").check_environment()
    assert "not on PATH" in err.value.message
    assert "nix-bin" in err.value.hint and "--backend local" in err.value.hint


def test_disabled_flakes_say_exactly_what_to_change(tmp_path, monkeypatch):
    project, _ = load_project(_project(tmp_path))
    monkeypatch.setenv("NIX_CONFIG", "experimental-features = nix-command")
    with pytest.raises(EnvironmentProblem) as err:
        NixBackend(project).check_environment()
    assert "flakes are not enabled" in err.value.message
    assert "experimental-features = nix-command flakes" in err.value.hint
