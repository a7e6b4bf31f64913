"""The one repo-id rule (publisher/hub_names.py): check (build.toml's
[general.hub] repo-id), push (REPO_ID) and our Hub server accept and refuse
the same ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.cli import main
from publisher.errors import HubError
from publisher.hub_names import is_owner, is_trust_entry
from publisher.hub_server.storage import check_repo_id
from publisher.project.load import load_project

from push_fixtures import write_scale

VALID = ["my-org/relu-kernel", "kernels-community/activation", "Org_1/name.v2", "a/b", "o/" + "n" * 96]
INVALID = ["my-org/relu--kernel", "org/na..me", "org/name.git", "org/-name", "org/name-", "noslash", "a/b/c",
           "org/na me", "orgé/name", "o/" + "n" * 97, "/name", "org/"]


def _check_refuses(root: Path, repo_id: str) -> list[str]:
    toml = root / "build.toml"
    toml.write_text(toml.read_text().replace("[torch-noarch]", f"[general.hub]\nrepo-id = {repo_id!r}\n\n[torch-noarch]"))
    _, findings = load_project(root, layout=False)
    return [f.message for f in findings if f.code == "PB213"]


def _push_refuses(root: Path, repo_id: str, capsys, monkeypatch) -> str | None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")  # nothing may be reached before the id is judged
    with pytest.raises(SystemExit):
        main(["push", repo_id, str(root), "--dry-run"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err if "is not a Hub repo id" in err else None


@pytest.mark.parametrize("repo_id", VALID + INVALID)
def test_check_and_push_agree(tmp_path: Path, repo_id, capsys, monkeypatch):
    write_scale(tmp_path)
    pushed = _push_refuses(tmp_path, repo_id, capsys, monkeypatch)
    checked = _check_refuses(tmp_path, repo_id)
    assert bool(checked) == bool(pushed) == (repo_id in INVALID), (checked, pushed)
    if checked:
        assert "is not a kernel repo id (" in checked[0]  # the reason, not only the shape


@pytest.mark.parametrize("repo_id", VALID + INVALID)
def test_our_hub_server_judges_ids_as_push_does(repo_id):
    try:
        check_repo_id(repo_id)
        refused = False
    except HubError as err:
        refused = err.status == 400
    assert refused == (repo_id in INVALID)



@pytest.mark.parametrize("repo_id", VALID + INVALID)
def test_a_trust_entry_is_a_repo_id_or_an_owner_by_the_same_rule(repo_id):
    assert is_trust_entry(repo_id) == (repo_id in VALID or is_owner(repo_id))


@pytest.mark.parametrize("owner,valid", [("my-org", True), ("Org_1", True), ("my--org", False), ("-org", False),
                                         ("orgé", False), ("org.git", False), ("", False), ("a/b", False)])
def test_owners(owner, valid):
    assert is_owner(owner) is valid
