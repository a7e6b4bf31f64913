"""The Hub as a build cache: a variant the version branch already holds, built
from the same inputs (the fingerprint recorded in its metadata.json), is
fetched instead of compiled. What is fetched is checked against the digest in
its metadata.json (and, when the variant is signed, its sigstore bundle against
that metadata.json, offline as the push gate checks it) before the scheduler
validates and promotes it like a build.
Only a repository the user trusts is used (builder/hub_trust.py).

Reads need no token for a public repo (HF_TOKEN is used when set). A Hub that
cannot be read is a one-line note, and the variants are built as usual.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from publisher.builder.hub_trust import decide_trust
from publisher.builder.metadata import METADATA, check_variant, read_metadata, recorded_inputs
from publisher.errors import PublisherError
from publisher.push.hub_client import HubClient, RemoteFile, RetryPolicy
from publisher.push.signature import bundle_problem
from publisher.secrets import redact

# A cache must not hold a build up: one retry, then build.
_RETRY = RetryPolicy(attempts=2, base_seconds=0.5, max_seconds=1.0)


@dataclass(frozen=True)
class HubFetch:
    """The outcome of one lookup: `source` ("<repo>@<commit>") when the stage
    was filled, else None and `reason` says why the variant must be built."""

    source: str | None
    reason: str


class HubCache:
    def __init__(self, repo_id: str, branch: str, endpoint: str | None = None,
                 on_note: Callable[[str], None] = lambda note: None, trusted: tuple[str, ...] = ()):
        self.repo_id = repo_id
        self.branch = branch
        self.trusted = trusted
        self._endpoint = endpoint
        self._on_note = on_note
        self._lock = threading.Lock()
        self._read = False
        self._client: HubClient | None = None
        self._commit: str | None = None
        self._files: dict[str, RemoteFile] = {}
        self._unreadable: str | None = None

    def _branch(self) -> None:
        """List the branch once per build (variants are looked up from several threads)."""
        with self._lock:
            if self._read:
                return
            self._read = True
            try:
                client = HubClient(self._endpoint, retry=_RETRY)
                branches = client.branches_if_exists(self.repo_id)
                if branches is None:
                    self._unreadable = f"{self.repo_id} is not on the Hub yet"
                    return
                commit = branches.get(self.branch)
                if commit is None:
                    self._unreadable = f"{self.repo_id} has no branch {self.branch} yet"
                    return
                trust = decide_trust(client, self.repo_id, self.trusted)
                if not trust.trusted:
                    owner = self.repo_id.split("/", 1)[0]
                    self._unreadable = f"{self.repo_id} is not trusted"
                    self._on_note(f"note: hub cache: not reusing binaries from {self.repo_id}: {trust.reason}; "
                                  f"building every variant (to trust it: --hub-cache-trust {owner}, "
                                  f"or hub-cache-trust = [\"{owner}\"] in publisher.toml)")
                    return
                self._files = client.tree(self.repo_id, commit)
                self._client, self._commit = client, commit
            except (PublisherError, ValueError, OSError) as err:  # a cache never stops a build
                self._unreadable = f"{self.repo_id} could not be read ({_why(err)})"
                self._on_note(f"note: hub cache: {self._unreadable}; building every variant")

    def fetch(self, variant: str, fingerprint: str, stage: Path) -> HubFetch:
        """Fill the empty folder `stage` with `variant` from the branch when it
        was built from `fingerprint`."""
        self._branch()
        if self._client is None or self._commit is None:
            return HubFetch(None, self._unreadable or "no hub cache")
        prefix = f"build/{variant}/"
        paths = sorted(p for p in self._files if p.startswith(prefix))
        where = f"{self.repo_id}@{self.branch} ({self._commit[:12]})"
        if prefix + METADATA not in paths:
            return HubFetch(None, f"{variant} is not on {where}")
        download = Path(tempfile.mkdtemp(prefix=f"{variant}-hub-", dir=stage.parent))
        try:
            self._client.download(self.repo_id, self._commit, [prefix + METADATA], download)
            fetched = download / "build" / variant
            try:
                recorded = recorded_inputs(read_metadata(fetched))
            except ValueError as err:
                return HubFetch(None, f"{variant} on {where} has no usable metadata.json ({err})")
            if recorded != fingerprint:
                why = "records no inputs fingerprint" if recorded is None else "was built from other inputs"
                return HubFetch(None, f"{variant} on {where} {why}")
            self._client.download(self.repo_id, self._commit, [p for p in paths if p != prefix + METADATA], download)
            check = check_variant(fetched)
            if not check.ok:
                return HubFetch(None, f"{variant} on {where} does not match its own digest ({check.problems[0]})")
            unsigned = bundle_problem(fetched)  # a bundle, when there is one, must sign this metadata.json
            if unsigned:
                return HubFetch(None, f"{variant} on {where}: {unsigned}")
            os.rmdir(stage)  # the scheduler made it empty; the verified folder takes its place
            os.rename(fetched, stage)
            return HubFetch(f"{self.repo_id}@{self._commit}", f"inputs match {variant} on {where}")
        except (PublisherError, ValueError, OSError) as err:
            return HubFetch(None, f"fetching {variant} from {where} failed ({_why(err)})")
        finally:
            shutil.rmtree(download, ignore_errors=True)


def _why(err: Exception) -> str:
    text = err.message if isinstance(err, PublisherError) else (str(err).strip().splitlines() or [type(err).__name__])[0]
    return redact(text)
