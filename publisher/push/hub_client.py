"""THE module that talks to the Hub, through huggingface_hub with repo_type="kernel".

It turns Hub answers into publisher errors (401/403 explain how to get kernel
publishing access, 412 is a concurrent push) and retries transient failures
(5xx, 429, dropped connections, timeouts) with backoff. A retried commit is
safe: every commit carries `parent_commit`, and after a lost answer the
caller checks whether the commit landed (see push/commit.py).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from publisher import env

env.hub_endpoint(None)  # huggingface_hub parses HF_ENDPOINT while it is imported: a bad one is a usage error first

import httpx2  # noqa: E402  (huggingface_hub >= 2.0 sends with it)
import huggingface_hub  # noqa: E402
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, constants  # noqa: E402
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError, RevisionNotFoundError  # noqa: E402
from huggingface_hub.hf_api import RepoFile  # noqa: E402
from huggingface_hub.lfs import UploadInfo  # noqa: E402

from publisher import __version__, secrets  # noqa: E402
from publisher.consumer import Publisher  # noqa: E402
from publisher.errors import (  # noqa: E402
    AuthError,
    ConflictError,
    EnvironmentProblem,
    OfflineError,
    PublisherError,
    TransientError,
)

# The oldest huggingface_hub that commits to kernel repos (1.x refuses repo_type="kernel" in create_commit);
# pyproject.toml requires the same (tests/test_distribution.py)
MIN_HUB = "2.0"

REPO_TYPE = "kernel"
_TRANSIENT_STATUS = (429, 500, 502, 503, 504)
T = TypeVar("T")

ACCESS_HINT = (
    "publishing a kernel needs a token with write access to the repo's namespace: create one at "
    "<endpoint>/settings/tokens (type \"Write\"), then `export HF_TOKEN=...` or run `hf auth login`. "
    "To publish under an organization you must be a member with write rights; for users to load it "
    "without trust_remote_code=True the organization must be a trusted kernel publisher "
    "(ask the Hub team, see https://huggingface.co/docs/kernels)."
)



@dataclass(frozen=True)
class RemoteFile:
    path: str
    size: int
    blob_id: str  # git blob sha1 (of the LFS pointer for LFS files)
    lfs_sha256: str | None


@dataclass(frozen=True)
class Upload:
    """A file to add (from disk or bytes) or, with source None, a path to delete.
    `sha256` (hex), when the caller has hashed the file already, is not computed again."""

    path_in_repo: str
    source: str | bytes | None
    sha256: str | None = None

    def operation(self) -> CommitOperationAdd | CommitOperationDelete:
        if self.source is None:
            return CommitOperationDelete(self.path_in_repo)
        op = CommitOperationAdd(self.path_in_repo, self.source)
        if self.sha256 and isinstance(self.source, str):
            info = op.upload_info  # from a path it holds only the size and a sample until the hash is asked for
            op.upload_info = UploadInfo(size=info.size, sample=info.sample, sha256=bytes.fromhex(self.sha256))
        return op


@dataclass(frozen=True)
class CommitResult:
    oid: str
    url: str
    pr_url: str | None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_seconds: float = 1.0
    max_seconds: float = 16.0

    @classmethod
    def from_env(cls) -> RetryPolicy:
        """PUBLISHER_HUB_RETRIES / PUBLISHER_HUB_BACKOFF let tests and slow links tune the policy."""
        return cls(attempts=env.hub_attempts(cls.attempts), base_seconds=env.hub_backoff(cls.base_seconds))

    def wait(self, attempt: int) -> float:
        """Seconds to wait after failed attempt `attempt` (1-based): doubling, capped."""
        return min(self.max_seconds, self.base_seconds * 2 ** (attempt - 1))


def is_transient(err: BaseException) -> bool:
    seen: BaseException | None = err
    while seen is not None:  # huggingface_hub wraps LFS upload failures in RuntimeError
        if isinstance(seen, httpx2.TransportError):
            return True
        if isinstance(seen, HfHubHTTPError) and seen.response is not None:
            return seen.response.status_code in _TRANSIENT_STATUS
        seen = seen.__cause__
    return False


def _status(err: BaseException) -> int | None:
    response = getattr(err, "response", None)
    return getattr(response, "status_code", None)


class HubClient:
    def __init__(self, endpoint: str | None = None, token: str | None = None,
                 retry: RetryPolicy | None = None, on_retry: Callable[[str], None] | None = None):
        _require_hub_version()
        if env.hub_xet_disabled():
            # huggingface_hub reads this once at import; honour it when it is set later (tests, `release`).
            constants.HF_HUB_DISABLE_XET = True
        # likewise HF_HUB_OFFLINE; a dry run asks, so it can plan offline without the Hub
        constants.HF_HUB_OFFLINE = env.hub_offline()
        self.offline = constants.HF_HUB_OFFLINE
        self.endpoint = env.hub_endpoint(endpoint)
        self.token = env.hub_token(token)
        secrets.register(self.token)
        self.retry = retry or RetryPolicy.from_env()
        self.on_retry = on_retry or (lambda message: None)
        self.api = HfApi(endpoint=self.endpoint, token=self.token or False,
                         library_name="publisher", library_version=__version__)

    def single_attempt(self) -> HubClient:
        """This client asking once (a look-ahead whose failure the caller repeats with retries)."""
        once = copy.copy(self)
        once.retry = RetryPolicy(attempts=1, base_seconds=self.retry.base_seconds, max_seconds=self.retry.max_seconds)
        return once

    # -- error handling ----------------------------------------------------
    def _call(self, what: str, fn: Callable[[], T], retry: bool = True) -> T:
        for attempt in range(1, self.retry.attempts + 1):
            try:
                return fn()
            except Exception as err:  # noqa: BLE001 - classified below
                if retry and is_transient(err) and attempt < self.retry.attempts:
                    wait = self.retry.wait(attempt)
                    self.on_retry(secrets.redact(f"{what}: {_short(err)}; retrying in {wait:g}s "
                                                 f"(attempt {attempt + 1}/{self.retry.attempts})"))
                    time.sleep(wait)
                    continue
                raise self.translate(what, err) from None
        raise AssertionError("RetryPolicy.attempts is at least 1")

    def translate(self, what: str, err: BaseException) -> BaseException:
        if isinstance(err, OfflineModeIsEnabled):
            return OfflineError(f"{what}: HF_HUB_OFFLINE is set, and this needs the Hub at {self.endpoint}",
                                "unset HF_HUB_OFFLINE to push (`push --dry-run` plans from the build alone while offline)")
        if _no_xet(err):
            return EnvironmentProblem(
                f"{what}: the Hub at {self.endpoint} has no Xet storage (it answers 404 to xet-write-token), and "
                "huggingface_hub sends files through Xet unless told not to",
                "export HF_HUB_DISABLE_XET=1 (files then go through plain LFS, which Hub-compatible servers "
                "without Xet accept) and push again")
        status = _status(err)
        hint = ACCESS_HINT.replace("<endpoint>", self.endpoint)
        if status == 401 and not isinstance(err, (RevisionNotFoundError,)):
            why = "no token was found" if not self.token else "the Hub did not accept the token"
            return AuthError(f"{what}: not authorised (401): {why}", hint)
        if status == 403:
            return AuthError(f"{what}: forbidden (403): {_server_message(err)}", hint)
        if status == 412:
            return ConflictError(
                f"{what}: the branch changed while this push was running (another push landed first); "
                "nothing from this push was committed",
                "run the push again: it re-reads the branch and uploads only what still differs",
            )
        if isinstance(err, RepositoryNotFoundError):
            # a 404 is a wrong, deleted or renamed repo id: access rights only matter when we sent no token
            return PublisherError(f"{what}: repository not found on {self.endpoint}",
                                  "check the repo id (was the repo deleted or renamed?)" + (
                                      "" if self.token else "; if it is private, set HF_TOKEN or run `hf auth login`"))
        if is_transient(err):
            how = "failed" if self.retry.attempts == 1 else f"keeps failing ({self.retry.attempts} attempts)"
            return TransientError(f"{what}: the Hub at {self.endpoint} {how}: {_short(err)}",
                                  "try again later; a rerun resumes where this one stopped")
        if isinstance(err, (HfHubHTTPError, httpx2.HTTPError)):
            return EnvironmentProblem(f"{what}: {_short(err)}")
        return err

    # -- reads ---------------------------------------------------------------
    def ensure_repo(self, repo_id: str, private: bool) -> str:
        url = self._call(f"create repo {repo_id}", lambda: self.api.create_repo(
            repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True))
        return str(url)

    def repo_exists(self, repo_id: str) -> bool:
        return self._call(f"look up {repo_id}", lambda: self.api.repo_exists(repo_id, repo_type=REPO_TYPE))

    def branches(self, repo_id: str) -> dict[str, str]:
        refs = self._call(f"list refs of {repo_id}", lambda: self.api.list_repo_refs(repo_id, repo_type=REPO_TYPE))
        return {b.name: b.target_commit for b in refs.branches}

    def branches_if_exists(self, repo_id: str) -> dict[str, str] | None:
        """branches(), or None when the repo does not exist: one round trip where
        repo_exists() then branches() would take two."""
        def refs() -> dict[str, str] | None:
            try:
                listing = self.api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
            except RepositoryNotFoundError:
                return None
            return {b.name: b.target_commit for b in listing.branches}

        return self._call(f"list refs of {repo_id}", refs)

    def create_branch(self, repo_id: str, branch: str, revision: str) -> bool:
        """Create `branch` at `revision`; False if a branch of that name already exists."""
        def create() -> bool:
            try:
                self.api.create_branch(repo_id, branch=branch, revision=revision, repo_type=REPO_TYPE)
                return True
            except HfHubHTTPError as err:
                if _status(err) == 409:
                    return False
                raise

        return self._call(f"create branch {branch}", create)

    def delete_branch(self, repo_id: str, branch: str) -> None:
        self._call(f"delete branch {branch}", lambda: self.api.delete_branch(repo_id, branch=branch, repo_type=REPO_TYPE))

    def tree(self, repo_id: str, revision: str) -> dict[str, RemoteFile]:
        def listing() -> dict[str, RemoteFile]:
            return {
                f.path: RemoteFile(f.path, f.size, f.blob_id, f.lfs.sha256 if f.lfs else None)
                for f in self.api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=revision, recursive=True)
                if isinstance(f, RepoFile)
            }

        return self._call(f"list files of {repo_id}@{revision[:12]}", listing)

    def download(self, repo_id: str, revision: str, paths: Iterable[str], local_dir: Path) -> None:
        """Fetch files of `revision` into local_dir/<path> (huggingface_hub also
        leaves its bookkeeping in local_dir/.cache)."""
        def fetch() -> None:
            for path in paths:
                self.api.hf_hub_download(repo_id, path, repo_type=REPO_TYPE, revision=revision,
                                         local_dir=str(local_dir))

        self._call(f"download from {repo_id}@{revision[:12]}", fetch)

    def whoami(self) -> dict | None:
        """The token's account (name, orgs, token role), or None without a token."""
        if not self.token:
            return None
        return self._call("look up the token's account", lambda: self.api.whoami())

    def trusted_publisher(self, owner: str) -> bool:
        """Whether the Hub marks `owner` a trusted kernel publisher (what
        kernels.get_kernel checks); a user, not an org, is never one."""
        return self.publisher(owner) is Publisher.TRUSTED

    def publisher(self, owner: str) -> Publisher:
        """What the Hub's org overview says of `owner`, asked as `kernels` asks it: a trusted kernel
        publisher, an org it does not mark, or no org at all (404: a user account)."""
        def overview() -> Publisher:
            try:
                info = self.api.get_organization_overview(owner)
            except HfHubHTTPError as err:
                if _status(err) == 404:  # a user, or no such org
                    return Publisher.USER
                raise
            return Publisher.TRUSTED if getattr(info, "trustedKernelPublisher", False) else Publisher.UNTRUSTED

        return self._call(f"look up {owner} on the Hub", overview)

    def is_private(self, repo_id: str) -> bool:
        return bool(self._call(f"look up {repo_id}", lambda: self.api.repo_info(repo_id, repo_type=REPO_TYPE).private))

    # -- writes --------------------------------------------------------------
    def upload(self, repo_id: str, uploads: Iterable[Upload], revision: str,
               sent: Mapping[str, CommitOperationAdd] | None = None) -> list[CommitOperationAdd | CommitOperationDelete]:
        """Send the LFS files of `uploads` ahead of their commit (LFS objects belong
        to the repo, not to a branch); `revision` answers which files are LFS and
        which are unchanged. Pass the result to commit(..., operations=...).
        `sent`: path -> an operation already uploaded, asked of the same revision (not sent again)."""
        operations = [(sent or {}).get(u.path_in_repo) or u.operation() for u in uploads]
        additions = [op for op in operations if isinstance(op, CommitOperationAdd)]
        self._call(f"upload to {repo_id}", lambda: self.api.preupload_lfs_files(
            repo_id, additions, repo_type=REPO_TYPE, revision=revision, free_memory=False))
        return operations

    def commit(self, repo_id: str, branch: str, uploads: Iterable[Upload], message: str, parent_commit: str,
               create_pr: bool = False, description: str = "",
               operations: list[CommitOperationAdd | CommitOperationDelete] | None = None) -> CommitResult:
        """One create_commit, not retried here: the caller reconciles after a failure.
        `operations`: from upload() (their LFS files are not sent again), else made from `uploads`."""
        operations = operations if operations is not None else [u.operation() for u in uploads]
        info = self._call(f"commit to {repo_id}@{branch}", lambda: self.api.create_commit(
            repo_id, operations, commit_message=message, commit_description=description, repo_type=REPO_TYPE,
            revision=branch, parent_commit=parent_commit or None, create_pr=create_pr), retry=False)
        return CommitResult(info.oid, str(info.commit_url), info.pr_url)


def _require_hub_version() -> None:
    from packaging.version import Version

    if Version(huggingface_hub.__version__) < Version(MIN_HUB):
        raise EnvironmentProblem(
            f"huggingface_hub {huggingface_hub.__version__} cannot write to kernel repos (it needs {MIN_HUB} or newer)",
            f"pip install --upgrade 'huggingface_hub>={MIN_HUB}' (another package pinning it older? "
            "install publisher in its own environment)")


def _no_xet(err: BaseException) -> bool:
    """The Xet upload path found no Xet service (huggingface_hub asks for a write token without asking
    the server whether it has Xet; the failure comes from the Xet client, as a 404 in its text)."""
    seen: BaseException | None = err
    while seen is not None:
        text = str(seen)
        if "xet-write-token" in text and ("404" in text or _status(seen) == 404):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _server_message(err: BaseException) -> str:
    response = getattr(err, "response", None)
    message = response.headers.get("X-Error-Message") if response is not None else None
    return secrets.redact(message or getattr(err, "server_message", None) or "the server gave no reason")


def _short(err: BaseException) -> str:
    """One line for a message: the error's first line, carried on when it only
    introduces what follows ("Bad request:"), with the server's own message."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    server = getattr(err, "server_message", None)
    if server and server.strip() and server.strip() not in text:
        text = f"{text} {server.strip()}" if text else server.strip()
    # huggingface_hub writes a missing server message as "None." or leaves "Bad request:" bare
    text = re.sub(r"(:\s*None\.?|:)$", " (the server gave no reason)", text)
    if not text:
        status = _status(err)
        text = type(err).__name__ + (f" (HTTP {status})" if status else "")
    return secrets.redact(text)
