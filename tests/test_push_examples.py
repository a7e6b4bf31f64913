"""The example projects, built for real (`publisher build --local`), tested for
real (`publisher test`), pushed to the server, then loaded with
`kernels.get_kernel(..., version=1, backend="cpu", trust_remote_code=[repo])` in another
process (the org is not one the server marks trusted) and checked (the CPU tensors of the
checks run whichever torch flavour is installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cli_helper import run_cli
from push_fixtures import build, load_kernel

PROJECTS = Path(__file__).resolve().parent.parent / "kernel_projects"

CHECKS = {
    "softcap": """
        import torch, kernels
        k = kernels.get_kernel("{repo}", version=1, backend="cpu", trust_remote_code=["{repo}"])
        x = torch.tensor([-100.0, 0.5, 100.0])
        assert torch.allclose(k.softcap(x, 30.0), 30.0 * torch.tanh(x / 30.0))
        print("OK", sorted(k.__all__))
    """,
    "rmsnorm": """
        import torch, kernels
        k = kernels.get_kernel("{repo}", version=1, backend="cpu", trust_remote_code=["{repo}"])
        x, w = torch.randn(4, 64), torch.randn(64)
        ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        assert torch.allclose(k.rms_norm(x, w, 1e-6), ref, atol=1e-5)
        print("OK", sorted(k.__all__))
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softcap", "rmsnorm"])
def test_example_push_and_load(hub_env, tmp_path, name):
    if not (PROJECTS / name / "build.toml").exists():
        pytest.fail(f"kernel_projects/{name} is missing")
    project = tmp_path / name
    shutil.copytree(PROJECTS / name, project, ignore=shutil.ignore_patterns("build", "__pycache__"))
    env = hub_env.env()
    # No compiled CUDA variant: under a CUDA torch `--local` would compile one, which no check here can run
    build(project, env, "--skip", "*-cu[0-9]*-*")
    tested = run_cli("test", str(project), env=env, timeout=900)
    # Variants without hardware here (CUDA) are published with --allow-untested, which says so loudly;
    # --partial: `build --local` of a compiled kernel makes only this machine's variant, no required one.
    repo = f"kernels-publisher-test/{name}"
    pushed = run_cli("push", repo, str(project), "--allow-untested", "--partial", env=env)
    assert pushed.returncode == 0, tested.stdout + pushed.stderr
    assert "verified:" in pushed.stdout
    loaded = load_kernel(env, CHECKS[name].format(repo=repo))
    assert "OK" in loaded.stdout, loaded.stderr
