"""The public API at push: what the version branch holds (`public-api.json`)
against what this push would publish. Additions are fine; a removed or changed
function, layer or op schema on the same version is refused with "bump
`version` in build.toml" (--allow-api-change for the deliberate case); the
card lists the API. End to end against `publisher hub-server`; extraction on
packages shaped like real kernels."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from publisher.project.load import load_project, require_project
from publisher.push.public_api import API_FILE, PublicApi, compare, op_schemas, python_api

from cli_helper import run_cli
from push_fixtures import build, repo_name, write_scale

ROOT = Path(__file__).resolve().parents[1]


# ---- extraction (quick) ----

def test_the_example_kernels_api_is_read_from_its_package_and_binding():
    project = require_project(ROOT / "kernel_projects" / "rmsnorm")
    api = python_api(project.package_dir, "rmsnorm")
    assert api["py rmsnorm.rms_norm"] == "(x: torch.Tensor, weight: torch.Tensor | None=None, eps: float=1e-06) -> torch.Tensor"
    assert api["py rmsnorm.layers.RMSNorm(bases)"] == "nn.Module"
    assert api["py rmsnorm.layers.RMSNorm.forward"] == "(self, hidden_states: torch.Tensor) -> torch.Tensor"
    assert not [k for k in api if any(part.startswith("_") for part in k[3:].split("."))]  # private: not the API
    assert not [k for k in api if k.endswith(".ops")]  # from the generated _ops module: not the API
    assert op_schemas(project) == {
        "op rms_norm": "rms_norm(Tensor input, Tensor? weight, float eps) -> Tensor",
        "op fused_add_rms_norm": "fused_add_rms_norm(Tensor input, Tensor residual, Tensor? weight, float eps) -> (Tensor, Tensor)"}


def test_a_package_shaped_like_kernels_community_activation(tmp_path):
    """No __all__: its public names; re-exports from its modules followed; layers' classes; the generated
    `_ops` module and what comes from it left out."""
    pkg = tmp_path / "activation"
    (pkg / "layers").mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""\
        import torch
        from ._ops import ops
        from . import layers
        from .fused import gelu_and_mul as gelu_tanh_and_mul


        def silu_and_mul(out: torch.Tensor, x: torch.Tensor) -> None:
            ops.silu_and_mul(out, x)


        def _helper():
            pass
        """))
    (pkg / "fused.py").write_text("def gelu_and_mul(out, x, approximate='tanh'):\n    pass\n")
    (pkg / "_ops.py").write_text("import torch\nops = torch.ops._activation_cuda_0123abc\n")
    (pkg / "layers" / "__init__.py").write_text(textwrap.dedent("""\
        import torch.nn as nn
        from .._ops import ops


        class SiluAndMul(nn.Module):
            can_torch_compile: bool = True

            def forward(self, x):
                return x

            def _private(self):
                pass
        """))
    assert python_api(pkg, "activation") == {
        "py activation.silu_and_mul": "(out: torch.Tensor, x: torch.Tensor) -> None",
        "py activation.gelu_tanh_and_mul": "(out, x, approximate='tanh')",
        "py activation.layers.SiluAndMul(bases)": "nn.Module",
        "py activation.layers.SiluAndMul.forward": "(self, x)",
    }


def test_schemas_are_read_as_registered_whatever_the_spelling(tmp_path):
    (tmp_path / "torch-ext").mkdir()
    (tmp_path / "build.toml").write_text('[general]\nname = "gemm"\nversion = 1\nedition = 5\nlicense = "mit"\n'
                                         'backends = ["cpu"]\n[torch]\nsrc = ["torch-ext/b.cpp"]\n')
    (tmp_path / "torch-ext" / "b.cpp").write_text(textwrap.dedent("""\
        TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
          // ops.def("old(Tensor x) -> Tensor");
          ops.def("gemm(Tensor a, Tensor b,"
                  "     Tensor(a!)? out=None)->Tensor");
          ops.def("plain", &plain);
        }
        """))
    project, _ = load_project(tmp_path, layout=False)
    assert op_schemas(project) == {"op gemm": "gemm(Tensor a, Tensor b, Tensor(a!)? out=None) -> Tensor",
                                   "op plain": "<schema inferred from the C++ function>"}


def test_additions_are_not_a_change_removals_and_new_signatures_are():
    before = PublicApi({"py k.f": "(x)", "py k.g": "(x)", "op f": "f(Tensor x) -> Tensor"})
    now = PublicApi({"py k.f": "(x, y=1)", "py k.h": "(x)", "op f": "f(Tensor x) -> Tensor"})
    change = compare(before, now)
    assert change.breaking and change.removed == (("py k.g", "(x)"),) and change.changed == (("py k.f", "(x)", "(x, y=1)"),)
    assert change.added == (("py k.h", "(x)"),)
    assert not compare(before, PublicApi({**before.entries, "py k.z": "()"})).breaking
    assert PublicApi.from_json(now.to_json()) == now and PublicApi.from_json("{]") is None


# ---- at push, against the Hub server (slow) ----

def _api(hub) -> HfApi:
    return HfApi(endpoint=hub.url, token=hub.write_token)


def _record(hub, repo: str, revision: str) -> dict:
    path = _api(hub).hf_hub_download(repo, API_FILE, repo_type="kernel", revision=revision)
    return json.loads(Path(path).read_text())["api"]


def _head(hub, repo: str, branch: str) -> str:
    return next(b.target_commit for b in _api(hub).list_repo_refs(repo, repo_type="kernel").branches if b.name == branch)


def _rebuild(project: Path, env: dict, extra: str = "", version: int = 1, replace: tuple[str, str] | None = None) -> None:
    write_scale(project, version=version, extra=extra)
    if replace:
        init = project / "torch-ext" / "scale" / "__init__.py"
        init.write_text(init.read_text().replace(*replace))
    build(project, env)


@pytest.mark.slow  # publishes to the Hub server four times
def test_the_version_branch_keeps_its_api(hub_env, scale_project):
    repo, env = repo_name(), hub_env.env()
    first = run_cli("push", repo, str(scale_project), "--allow-untested", env=env)
    assert first.returncode == 0, first.stderr
    assert _record(hub_env, repo, "v1") == {"py scale.scale": "(x: torch.Tensor, factor: float) -> torch.Tensor"}
    readme = Path(_api(hub_env).hf_hub_download(repo, "README.md", repo_type="kernel")).read_text()
    assert "## Public API" in readme and "- `scale.scale(x: torch.Tensor, factor: float) -> torch.Tensor`" in readme

    # an addition on the same version: published, and recorded for the next push
    _rebuild(scale_project, env, extra="\n\n\ndef double(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n",
             replace=('__all__ = ["scale"]', '__all__ = ["scale", "double"]'))
    added = run_cli("push", repo, str(scale_project), "--allow-untested", "--json", env=env)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["public_api"]["added"] == ["py scale.double"]
    assert "py scale.double" in _record(hub_env, repo, "v1") and "PP301" not in added.stderr

    # a changed signature and a removed function on the same version: refused, nothing committed
    head = _head(hub_env, repo, "v1")
    _rebuild(scale_project, env, replace=("factor: float", "factor: float, inplace: bool = False"))
    refused = run_cli("push", repo, str(scale_project), "--allow-untested", env=env)
    assert refused.returncode == 1
    assert "PP301" in refused.stderr and "bump `version` in build.toml" in refused.stderr
    assert "removed py scale.double: (x: torch.Tensor) -> torch.Tensor" in refused.stderr
    assert ("changed py scale.scale: (x: torch.Tensor, factor: float) -> torch.Tensor  ->  "
            "(x: torch.Tensor, factor: float, inplace: bool=False) -> torch.Tensor") in refused.stderr
    assert _head(hub_env, repo, "v1") == head

    # deliberately: published, loudly
    forced = run_cli("push", repo, str(scale_project), "--allow-untested", "--allow-api-change", env=env)
    assert forced.returncode == 0, forced.stderr
    assert "warning: PP301" in forced.stderr and _head(hub_env, repo, "v1") != head
    assert "py scale.double" not in _record(hub_env, repo, "v1")

    # a new version is a new branch: nothing to keep from v1
    _rebuild(scale_project, env, version=2, replace=("factor: float", "k: float"))
    bumped = run_cli("push", repo, str(scale_project), "--allow-untested", env=env)
    assert bumped.returncode == 0, bumped.stderr
    assert "PP301" not in bumped.stderr and _record(hub_env, repo, "v2") == {"py scale.scale": "(x: torch.Tensor, k: float) -> torch.Tensor"}


@pytest.mark.slow  # publishes to the Hub server twice
def test_a_branch_without_a_record_is_pushed_with_a_warning(hub_env, scale_project):
    repo, env = repo_name(), hub_env.env()
    assert run_cli("push", repo, str(scale_project), "--allow-untested", env=env).returncode == 0
    _api(hub_env).delete_file(API_FILE, repo, repo_type="kernel", revision="v1")  # as published by other tools
    _rebuild(scale_project, env, replace=("factor: float", "k: float"))
    again = run_cli("push", repo, str(scale_project), "--allow-untested", env=env)
    assert again.returncode == 0, again.stderr
    assert "warning: PP302" in again.stderr and "cannot be checked" in again.stderr
    assert _record(hub_env, repo, "v1") == {"py scale.scale": "(x: torch.Tensor, k: float) -> torch.Tensor"}
