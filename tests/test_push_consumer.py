"""A published kernel loads as its card says, for every kind of owner, under
kernels 0.17's rules: against the Hub-compatible server (which marks only
TRUSTED_ORG a trusted kernel publisher, and has no org overview for the user
account USER), the card's own code blocks run as a consumer runs them: the
real kernels client, a fresh process and cache, no token."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from cli_helper import run_cli
from hub_fixtures import TRUSTED_ORG, USER
from push_fixtures import build, repo_name

pytestmark = pytest.mark.slow  # end-to-end: pushes, then loads from the Hub server in other processes


def consumer_env(hub, home: Path) -> dict[str, str]:
    """A consumer's environment: the server as its Hub, its own empty cache, no token."""
    env = {k: v for k, v in hub.env().items() if k not in ("HF_TOKEN", "LOCAL_KERNELS", "HF_HUB_CACHE")}
    env["HF_HOME"] = str(home)
    return env


def card_blocks(hub, repo: str, language: str) -> list[str]:
    readme = HfApi(endpoint=hub.url, token=hub.write_token).hf_hub_download(repo, "README.md", repo_type="kernel")
    return re.findall(rf"```{language}\n(.*?)```", Path(readme).read_text(), flags=re.S)


def run_python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("owner", [TRUSTED_ORG, "someone-org", USER], ids=["trusted-org", "untrusted-org", "user"])
def test_the_cards_python_block_loads_as_written_for_every_owner(hub_env, scale_project, tmp_path, owner):
    repo = repo_name(owner=owner)
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert pushed.returncode == 0, pushed.output
    (usage,) = card_blocks(hub_env, repo, "python")
    if owner == TRUSTED_ORG:
        assert f'get_kernel("{repo}", version=1)\n' in usage and "trust_remote_code" not in usage
    else:
        assert f'get_kernel("{repo}", version=1, trust_remote_code=["{repo}"])' in usage
        assert ("is a user account" if owner == USER else f"{owner} is not a trusted kernel publisher") in usage
    # push loaded it the same way, and says so beside the resolution table
    assert "in each environment of the matrix:" in pushed.stdout
    assert "as a consumer (fresh cache, no token): loaded torch-cpu" in pushed.stdout

    ran = run_python(usage, consumer_env(hub_env, tmp_path / "consumer"), tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "<function scale" in ran.stdout


def test_a_bare_call_loads_nothing_for_an_untrusted_owner(hub_env, scale_project, tmp_path):
    """What the card must not show: kernels refuses an owner the Hub does not mark trusted."""
    repo = repo_name(owner="someone-org")
    assert run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env()).returncode == 0
    ran = run_python(f"import kernels\nkernels.get_kernel({repo!r}, version=1)",
                     consumer_env(hub_env, tmp_path / "consumer"), tmp_path)
    assert ran.returncode != 0 and "is not from a trusted publisher" in ran.stderr


def test_a_card_template_with_a_bare_call_is_refused_for_an_untrusted_owner(hub_env, scale_project):
    (scale_project / "CARD.md").write_text('# scale\n\n```python\nk = get_kernel("{{ repo_id }}", version=1)\n```\n')
    repo = repo_name(owner=USER)
    refused = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert refused.returncode == 1, refused.output
    assert (f'PP402 the card shows `get_kernel("{repo}", version=1)`, which fails for consumers: {USER} is a user '
            "account, which the Hub never marks a trusted kernel publisher") in refused.stderr
    assert "{{ load_call }}" in refused.stderr
    assert not HfApi(endpoint=hub_env.url, token=hub_env.write_token).repo_exists(repo, repo_type="kernel")

    (scale_project / "CARD.md").write_text('# scale\n\n```python\n{{ trust_note }}\nk = {{ load_call }}\n```\n')
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert pushed.returncode == 0, pushed.output
    assert f'k = get_kernel("{repo}", version=1, trust_remote_code=["{repo}"])' in card_blocks(hub_env, repo, "python")[0]


def test_a_published_version_consumers_cannot_load_ends_the_push_with_the_fix(hub_env, scale_project):
    """A variant that asks for a newer kernels client than consumers have: published, verified on the
    branch, and push exits 4 naming why consumers cannot load it."""
    for variant in ("torch-cpu", "torch-cuda"):
        path = scale_project / "build" / variant / "metadata.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "kernels-minver": "99.0.0"}))
    repo = repo_name()
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert pushed.returncode == 4, pushed.output
    assert "verified: 9 file(s) on v1" in pushed.stdout and "in each environment of the matrix:" in pushed.stdout
    assert "error: published, but consumers cannot load it: " in pushed.stderr
    assert "requires kernels>=99.0.0" in pushed.stderr and "consumers need a newer kernels client" in pushed.stderr


def test_a_push_to_a_hub_without_xet_names_the_cause_and_the_fix(hub, scale_project, tmp_path):
    env = {k: v for k, v in hub.env().items() if k != "HF_HUB_DISABLE_XET"}
    env.update(HF_HOME=str(tmp_path / "hf-home"), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    pushed = run_cli("push", repo_name(), str(scale_project), "--allow-untested", env=env, process=True)
    assert pushed.returncode == 3, pushed.output
    assert "has no Xet storage (it answers 404 to xet-write-token)" in pushed.stderr
    assert "export HF_HUB_DISABLE_XET=1" in pushed.stderr and "free space and permissions" not in pushed.stderr
    assert list((tmp_path / "tmp").iterdir()) == []  # the consumer's folder, made for a load that never came, is gone


def test_an_init_project_published_by_an_untrusted_org_runs_its_card_as_written(hub_env, tmp_path):
    """The new user's path: init, build, test, push to an org the Hub does not trust; then the card's
    python block (silu on the CPU) and its benchmark commands, as a consumer."""
    repo = "my-org/demo-kernel"
    assert run_cli("init", repo, "--backends", "cpu", cwd=tmp_path).returncode == 0
    project = tmp_path / "demo-kernel"
    env = hub_env.env()
    build(project, env)
    tested = run_cli("test", str(project), env=env)
    assert tested.returncode == 0, tested.output
    pushed = run_cli("push", repo, str(project), "--partial", env=env)
    assert pushed.returncode == 0, pushed.output
    # push loaded the compiled variant as a consumer and found its op registered
    assert re.search(r"as a consumer \(fresh cache, no token\): loaded torch\d+-cxx11-cpu-x86_64-linux, "
                     r"1 op\(s\) registered", pushed.stdout), pushed.stdout

    consumer = consumer_env(hub_env, tmp_path / "consumer")
    (usage,) = card_blocks(hub_env, repo, "python")
    assert 'trust_remote_code=["my-org/demo-kernel"]' in usage
    ran = run_python(usage + "\nprint('SHAPE', tuple(y.shape))", consumer, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "SHAPE (4096, 4096)" in ran.stdout

    (commands,) = card_blocks(hub_env, repo, "bash")
    lines = commands.strip().splitlines()
    assert lines[0] == "pip install -U 'kernels[benchmark]'"  # installed here already
    bin_dir = Path(sys.executable).parent
    script = "\n".join(["set -e", *lines[1:]])
    consumer["PATH"] = f"{bin_dir}:{consumer['PATH']}"
    ran = subprocess.run(["bash", "-c", textwrap.dedent(script)], env=consumer, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "float32: " in ran.stderr and "bfloat16: " in ran.stderr, ran.stderr  # each workload timed


def test_a_private_release_is_loaded_with_the_token_consumers_need(hub_env, scale_project):
    repo = repo_name(owner="someone-org")
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", "--private", env=hub_env.env())
    assert pushed.returncode == 0, pushed.output
    assert "with your token (the repo is private): loaded torch-cpu" in pushed.stdout
    assert hub_env.write_token not in pushed.output
