"""The Hub-compatible server, driven by the real huggingface_hub client."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import uuid

import httpx2 as httpx  # huggingface_hub's own HTTP client
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import (
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from publisher.hub_server.server import HubServer, ServerConfig

from hub_fixtures import TRUSTED_ORG, USER

BINARY = b"\x7fELF\0\0" + bytes(range(256)) * 40  # has NUL bytes -> stored through LFS


@pytest.fixture
def api(hub_env) -> HfApi:
    return HfApi(endpoint=hub_env.url, token=hub_env.write_token)


@pytest.fixture
def repo(api) -> str:
    repo_id = f"org{uuid.uuid4().hex[:6]}/kernel"
    api.create_repo(repo_id, repo_type="kernel")
    return repo_id


def _commit(api, repo, files: dict[str, bytes], revision="main", **kw):
    ops = [CommitOperationAdd(path, data) for path, data in files.items()]
    return api.create_commit(repo, ops, commit_message="test", revision=revision, repo_type="kernel", **kw)


def test_create_existing_repo_is_409_with_url(hub_env, api, repo):
    r = httpx.post(f"{hub_env.url}/api/repos/create", json={"name": "kernel", "organization": repo.split("/")[0],
                                                               "type": "kernel"},
                   headers={"Authorization": f"Bearer {hub_env.write_token}"})
    assert r.status_code == 409
    assert r.json()["url"].endswith(f"/kernels/{repo}")
    assert api.create_repo(repo, repo_type="kernel", exist_ok=True).repo_id == repo


def test_commit_ids_and_blob_ids_are_git_ids(hub_env, api, repo, tmp_path):
    info = _commit(api, repo, {"build/torch-cpu/__init__.py": b"x = 1\n", "build/torch-cpu/k.so": BINARY})
    entries = {e.path: e for e in api.list_repo_tree(repo, repo_type="kernel", recursive=True)}
    assert entries["build/torch-cpu/__init__.py"].blob_id == hashlib.sha1(b"blob 6\0x = 1\n").hexdigest()
    lfs = entries["build/torch-cpu/k.so"].lfs
    assert lfs is not None and lfs.sha256 == hashlib.sha256(BINARY).hexdigest() and lfs.size == len(BINARY)
    if shutil.which("git"):
        # The stored objects are real git objects: git itself recomputes the commit id.
        repo_dir = hub_env.data_dir / "repos" / "kernel" / repo
        work = tmp_path / "git"
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        shutil.copytree(repo_dir / "objects", work / ".git" / "objects", dirs_exist_ok=True)
        out = subprocess.run(["git", "-C", str(work), "cat-file", "-t", info.oid], capture_output=True, text=True)
        assert out.stdout.strip() == "commit"
        fsck = subprocess.run(["git", "-C", str(work), "fsck", "--strict", info.oid], capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stderr


def test_parent_commit_mismatch_is_412_and_changes_nothing(api, repo):
    base = api.repo_info(repo, repo_type="kernel").sha
    first = _commit(api, repo, {"a.txt": b"a"}, parent_commit=base)
    with pytest.raises(HfHubHTTPError) as err:
        _commit(api, repo, {"b.txt": b"b"}, parent_commit=base)
    assert err.value.response.status_code == 412
    assert "A commit has happened since" in str(err.value)
    assert api.repo_info(repo, repo_type="kernel").sha == first.oid
    assert not api.file_exists(repo, "b.txt", repo_type="kernel")


def test_revisions_in_every_form(api, repo):
    api.create_branch(repo, branch="feature/x", repo_type="kernel")
    info = _commit(api, repo, {"f.txt": b"f"}, revision="feature/x")
    api.create_tag(repo, tag="t1", revision="feature/x", repo_type="kernel")
    for rev in ("feature/x", "refs/heads/feature/x", "t1", "refs/tags/t1", info.oid):
        assert api.repo_info(repo, repo_type="kernel", revision=rev).sha == info.oid, rev
    refs = api.list_repo_refs(repo, repo_type="kernel")
    assert {b.name: b.target_commit for b in refs.branches}["feature/x"] == info.oid
    assert [t.ref for t in refs.tags] == ["refs/tags/t1"]
    assert api.list_repo_commits(repo, repo_type="kernel", revision="t1")[0].commit_id == info.oid


def test_errors_carry_x_error_code(api, repo):
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info("nobody/nothing", repo_type="kernel")
    with pytest.raises(RevisionNotFoundError):
        api.repo_info(repo, repo_type="kernel", revision="v404")
    with pytest.raises(RemoteEntryNotFoundError):
        api.hf_hub_download(repo, "missing.txt", repo_type="kernel")
    with pytest.raises(RemoteEntryNotFoundError):
        list(api.list_repo_tree(repo, "no/such/dir", repo_type="kernel"))
    with pytest.raises(RepositoryNotFoundError):  # the same repo id as a model does not exist
        api.repo_info(repo)


def test_resolve_headers_and_ranges(hub_env, api, repo):
    info = _commit(api, repo, {"build/v/k.so": BINARY, "build/v/__init__.py": b"print(1)\n"})
    url = f"{hub_env.url}/kernels/{repo}/resolve/main/build/v/k.so"
    head = httpx.head(url)
    assert head.status_code == 200
    assert head.headers["X-Repo-Commit"] == info.oid
    assert head.headers["X-Linked-Etag"].strip('"') == hashlib.sha256(BINARY).hexdigest()
    assert int(head.headers["X-Linked-Size"]) == int(head.headers["Content-Length"]) == len(BINARY)
    assert httpx.get(url, headers={"Range": "bytes=10-19"}).content == BINARY[10:20]
    path = api.hf_hub_download(repo, "build/v/__init__.py", repo_type="kernel", revision=info.oid)
    assert open(path, "rb").read() == b"print(1)\n"


def test_writes_need_a_write_token(hub_env, repo):
    anonymous = HfApi(endpoint=hub_env.url, token=False)
    with pytest.raises(HfHubHTTPError) as err:
        anonymous.create_branch(repo, branch="v1", repo_type="kernel")
    assert err.value.response.status_code == 401
    reader = HfApi(endpoint=hub_env.url, token=hub_env.read_token)
    with pytest.raises(HfHubHTTPError) as err:
        _commit(reader, repo, {"x.txt": b"x"})
    assert err.value.response.status_code == 403
    assert "read-only" in str(err.value)
    assert reader.repo_info(repo, repo_type="kernel").sha  # reading is fine


def test_lfs_upload_is_verified(hub_env, api, repo):
    oid = hashlib.sha256(b"real content").hexdigest()
    auth = {"Authorization": f"Bearer {hub_env.write_token}"}
    batch = httpx.post(f"{hub_env.url}/kernels/{repo}.git/info/lfs/objects/batch", headers=auth,
                       json={"operation": "upload", "objects": [{"oid": oid, "size": 12}]}).json()
    href = batch["objects"][0]["actions"]["upload"]["href"]
    assert httpx.put(href, content=b"fake content").status_code == 400  # wrong sha256
    assert httpx.put(href, content=b"real").status_code == 400  # wrong size
    repo_dir = hub_env.data_dir / "repos" / "kernel" / repo
    assert not (repo_dir / "lfs" / oid[:2] / oid[2:]).exists()
    assert httpx.put(href.replace("ticket=", "ticket=x"), content=b"real content").status_code == 403
    assert httpx.put(href, content=b"real content").status_code == 200
    again = httpx.post(f"{hub_env.url}/kernels/{repo}.git/info/lfs/objects/batch", headers=auth,
                       json={"operation": "upload", "objects": [{"oid": oid, "size": 12}]}).json()
    assert "actions" not in again["objects"][0]  # already there: nothing to send


def test_commit_is_all_or_nothing(hub_env, api, repo):
    before = api.repo_info(repo, repo_type="kernel").sha
    body = "\n".join([
        '{"key": "header", "value": {"summary": "half"}}',
        '{"key": "file", "value": {"path": "ok.txt", "content": "b2s=", "encoding": "base64"}}',
        '{"key": "lfsFile", "value": {"path": "big.bin", "algo": "sha256", "oid": "' + "0" * 64 + '", "size": 3}}',
    ])
    r = httpx.post(f"{hub_env.url}/api/kernels/{repo}/commit/main", content=body,
                   headers={"Authorization": f"Bearer {hub_env.write_token}", "Content-Type": "application/x-ndjson"})
    assert r.status_code == 422
    assert api.repo_info(repo, repo_type="kernel").sha == before
    assert not api.file_exists(repo, "ok.txt", repo_type="kernel")


def test_preupload_reports_modes_and_remote_oids(api, repo):
    _commit(api, repo, {"a.py": b"a = 1\n"})
    op_same, op_bin = CommitOperationAdd("a.py", b"a = 1\n"), CommitOperationAdd("b.so", BINARY)
    api.preupload_lfs_files(repo, [op_same, op_bin], repo_type="kernel")
    assert op_same._upload_mode == "regular" and op_bin._upload_mode == "lfs"
    assert op_same._remote_oid == op_same._local_oid  # unchanged: upload_folder skips it
    # An unchanged file makes no commit through huggingface_hub either.
    before = api.repo_info(repo, repo_type="kernel").sha
    assert _commit(api, repo, {"a.py": b"a = 1\n"}).oid == before


def test_delete_and_create_pr(api, repo):
    _commit(api, repo, {"d/a.txt": b"a", "d/b.txt": b"b", "keep.txt": b"k"})
    api.create_commit(repo, [CommitOperationDelete("d/")], commit_message="rm", repo_type="kernel")
    assert sorted(api.list_repo_files(repo, repo_type="kernel")) == [".gitattributes", "keep.txt"]
    head = api.repo_info(repo, repo_type="kernel").sha
    pr = _commit(api, repo, {"new.txt": b"n"}, create_pr=True)
    assert pr.pr_url and pr.pr_num == 1
    assert api.repo_info(repo, repo_type="kernel").sha == head  # main untouched
    assert api.file_exists(repo, "new.txt", repo_type="kernel", revision="refs/pr/1")


def test_org_overview_answers_trust_as_the_hub_does(hub_env):
    """Only an org the server was told to mark is a trusted kernel publisher; a user account has no
    org overview at all (404), as on the Hub."""
    api = HfApi(endpoint=hub_env.url)
    assert api.get_organization_overview(TRUSTED_ORG).trustedKernelPublisher is True
    assert api.get_organization_overview("anyorg").trustedKernelPublisher is False
    with pytest.raises(HfHubHTTPError) as err:
        api.get_organization_overview(USER)
    assert err.value.response.status_code == 404


def test_server_config_trusts_no_org_unless_named(tmp_path):
    server = HubServer(tmp_path / "hub", ServerConfig()).start()
    try:
        assert HfApi(endpoint=server.url).get_organization_overview("kernels-community").trustedKernelPublisher is False
    finally:
        server.close()


def test_injected_faults(hub_env, api, repo):
    hub_env.fault("commit", status=503)
    with pytest.raises(HfHubHTTPError) as err:
        _commit(api, repo, {"x.txt": b"x"})
    assert err.value.response.status_code == 503
    hub_env.fault("commit", action="drop")
    with pytest.raises(httpx.TransportError):
        _commit(api, repo, {"x.txt": b"x"})
    assert not api.file_exists(repo, "x.txt", repo_type="kernel")
    hub_env.fault("commit", action="drop-after")  # lands, but the answer is lost
    with pytest.raises(httpx.TransportError):
        _commit(api, repo, {"y.txt": b"y"})
    assert api.file_exists(repo, "y.txt", repo_type="kernel")
    # preupload is retried by huggingface_hub itself (http_backoff): two 503s then success.
    hub_env.fault("preupload", status=503, times=2)
    _commit(api, repo, {"z.txt": b"z"})
    assert hub_env.state.stats()["requests"]["preupload"] == 3 + 3


def test_data_survives_a_restart(hub_env, tmp_path):
    token = "hf_" + "a" * 34
    first = HubServer(tmp_path, ServerConfig(tokens={token: "write"})).start()
    api = HfApi(endpoint=first.url, token=token)
    api.create_repo("o/r", repo_type="kernel")
    sha = _commit(api, "o/r", {"f.so": BINARY}).oid
    first.close()
    second = HubServer(tmp_path, ServerConfig(tokens={token: "write"})).start()
    try:
        api = HfApi(endpoint=second.url, token=token)
        assert api.repo_info("o/r", repo_type="kernel").sha == sha
        assert open(api.hf_hub_download("o/r", "f.so", repo_type="kernel", cache_dir=tmp_path / "c"), "rb").read() == BINARY
    finally:
        second.close()


@pytest.mark.parametrize("given", [True, False])
def test_hub_server_command_serves_the_token_it_names(tmp_path, given):
    """`publisher hub-server`: the banner names the URL, and the write token when it made one up; that token works."""
    import re
    import signal
    import sys
    import urllib.error
    import urllib.request

    argv = [sys.executable, "-m", "publisher", "hub-server", "--port", "0", "--data-dir", str(tmp_path / "hub")]
    proc = subprocess.Popen(argv + (["--token", "hf_given"] if given else []), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    try:
        banner = [proc.stderr.readline() for _ in range(3 if given else 4)]
        url = re.match(r"Hub-compatible server on (http://127\.0\.0\.1:\d+) ", banner[0]).group(1)
        assert banner[1].strip() == f"export HF_ENDPOINT={url} HF_HUB_DISABLE_XET=1"
        token = "hf_given" if given else re.search(r"export HF_TOKEN=(hf_\w+) ", banner[2]).group(1)
        assert ("HF_TOKEN" in "".join(banner)) is not given
        request = urllib.request.Request(f"{url}/api/whoami-v2", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200
        stranger = urllib.request.Request(f"{url}/api/whoami-v2", headers={"Authorization": "Bearer hf_stranger"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(stranger, timeout=10)
        assert refused.value.code == 401
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_agent_registry_is_served_and_cached_by_huggingface_hub(hub_env, tmp_path):
    """huggingface_hub asks for /api/agent-harnesses before its first request and
    keeps the answer a day: a second process does not ask again (as on the Hub)."""
    env = {**hub_env.env(), "HF_HOME": str(tmp_path / "home")}
    code = "from huggingface_hub import HfApi; HfApi().whoami()"
    hub_env.state.reset_stats()
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    requests = hub_env.state.stats()["requests"]
    assert requests.get("agent-harnesses") == 1 and requests.get("whoami") == 2, requests
