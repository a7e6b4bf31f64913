"""The Hub build cache reuses binaries only from a repository the user trusts
(builder/hub_trust.py), against a Hub-compatible server that marks no org a
trusted kernel publisher unless told to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from publisher.builder.hub_trust import decide_trust
from publisher.hub_server.server import HubServer, ServerConfig
from publisher.push.hub_client import HubClient

from cli_helper import run_cli
from hub_fixtures import Hub, _fake_token


@pytest.fixture(scope="module")
def strict_hub(tmp_path_factory) -> Hub:
    """A server whose user `publisher-dev` writes in org `team`, only reads in
    `readers`, and where only `vendor` is a trusted kernel publisher."""
    write, read = _fake_token(), _fake_token()
    config = ServerConfig(tokens={write: "write", read: "read"}, trusted_orgs=frozenset({"vendor"}),
                          orgs={"team": "write", "readers": "read"})
    data = tmp_path_factory.mktemp("strict-hub")
    server = HubServer(data, config).start()
    yield Hub(server, data, write, read)
    server.close()


@pytest.mark.parametrize("repo, token, allowed, trusted, why", [
    ("publisher-dev/scale", "write", (), True, "your token can write to publisher-dev/scale"),
    ("team/scale", "write", (), True, "your token can write to team/scale"),
    ("vendor/scale", "read", (), True, "the Hub marks vendor a trusted kernel publisher"),
    ("strangers/scale", "write", ("strangers",), True, "strangers is trusted by --hub-cache-trust"),
    ("strangers/scale", "write", ("strangers/scale",), True, "strangers/scale is trusted by"),
    ("strangers/scale", "write", ("strangers/other",), False, "strangers is not you, not an org you can write to"),
    ("publisher-dev/scale", "read", (), False, "publisher-dev is not you"),  # a read token cannot push there
    ("readers/scale", "write", (), False, "readers is not you"),  # member, without write rights
    ("strangers/scale", None, (), False, "not a trusted kernel publisher"),
])
def test_trust_decisions(strict_hub, monkeypatch, repo, token, allowed, trusted, why):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(strict_hub.data_dir / "no-login"))  # no stored login either
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    chosen = {"write": strict_hub.write_token, "read": strict_hub.read_token, None: None}[token]
    decision = decide_trust(HubClient(strict_hub.url, token=chosen), repo, allowed)
    assert decision.trusted is trusted and why in decision.reason, decision


def test_an_unreachable_hub_is_untrusted(monkeypatch):
    monkeypatch.setenv("PUBLISHER_HUB_RETRIES", "1")
    decision = decide_trust(HubClient("http://127.0.0.1:9", token=_fake_token()), "strangers/scale", ())
    assert not decision.trusted and "could not be checked" in decision.reason


def _build(project: Path, env: dict, out: Path, *args: str) -> tuple[dict, str]:
    result = run_cli("build", "--json", "--variant", "torch-cpu", "--out", str(out), *args, str(project), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    (row,) = json.loads(result.stdout)["variants"]
    return row, result.stderr


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_build_reuses_only_trusted_binaries(strict_hub, scale_project, tmp_path):
    env = strict_hub.env()
    repo = "strangers/scale"  # this server lets any write token push anywhere: the binaries got there somehow
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", "--no-card", env=env)
    assert pushed.returncode == 0, pushed.stderr

    row, stderr = _build(scale_project, env, tmp_path / "a", "--repo", repo)
    assert row["state"] == "built" and row["from"] is None
    (note,) = [line for line in stderr.splitlines() if "hub cache" in line]
    assert note.startswith("note: hub cache: not reusing binaries from strangers/scale: strangers is not you")
    assert "--hub-cache-trust strangers" in note and 'hub-cache-trust = ["strangers"] in publisher.toml' in note
    assert "Traceback" not in stderr and strict_hub.write_token not in stderr

    row, _ = _build(scale_project, env, tmp_path / "b", "--repo", repo, "--hub-cache-trust", "strangers")
    assert row["state"] == "fetched" and row["from"].startswith(f"hub cache {repo}@"), row

    (scale_project / "publisher.toml").write_text('hub-cache-trust = ["strangers/scale"]\n')
    row, stderr = _build(scale_project, env, tmp_path / "c", "--repo", repo)
    assert row["state"] == "fetched", stderr


def test_a_bad_trust_entry_is_a_clear_error(strict_hub, tmp_path):
    from push_fixtures import write_scale

    project = tmp_path / "scale"
    write_scale(project)
    result = run_cli("build", "--local", "--repo", "a/b", "--hub-cache-trust", "not an org", str(project), env=strict_hub.env())
    assert result.returncode == 2 and "--hub-cache-trust: `not an org` is not a Hub owner or repo id" in result.stderr
    (project / "publisher.toml").write_text("hub-cache-trust = \"strangers\"\n")
    result = run_cli("build", "--local", str(project), env=strict_hub.env())
    assert result.returncode != 0 and "publisher.toml" in result.stderr and "hub-cache-trust" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_a_signed_variant_is_fetched_only_while_its_bundle_signs_its_metadata(strict_hub, scale_project, tmp_path):
    from huggingface_hub import CommitOperationAdd, HfApi
    from test_push_signature import sign

    env = strict_hub.env()
    repo = "publisher-dev/scale"  # the user's own
    cpu, cuda = scale_project / "build" / "torch-cpu", scale_project / "build" / "torch-cuda"
    sign(cpu)
    sign(cuda)
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", "--no-card", env=env)
    assert pushed.returncode == 0, pushed.stderr
    row, _ = _build(scale_project, env, tmp_path / "a", "--repo", repo)
    assert row["state"] == "fetched", row
    assert (tmp_path / "a" / "torch-cpu" / "metadata.json.sigstore").read_bytes() == \
        (cpu / "metadata.json.sigstore").read_bytes()

    # the bundle of another metadata.json in its place: the variant is compiled, not fetched
    HfApi(endpoint=strict_hub.url, token=strict_hub.write_token).create_commit(
        repo, [CommitOperationAdd("build/torch-cpu/metadata.json.sigstore", (cuda / "metadata.json.sigstore").read_bytes())],
        commit_message="swap bundle", repo_type="kernel", revision="v1")
    row, _ = _build(scale_project, env, tmp_path / "b", "--repo", repo)
    assert row["state"] == "built"
    assert "metadata.json.sigstore signs another metadata.json" in Path(row["log"]).read_text()
