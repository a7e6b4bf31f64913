"""The build's files sent while the push still waits for the Hub's answers.

Once the gate has passed a build, its LFS files go to the repo at once (asked
of main, as a new version branch's upload is), beside the look-up of the
repo's branches and the read the plan needs. LFS objects belong to the repo,
not to a branch, and nothing is committed here: what is sent is invisible until
the push's one commit names it, and a push that stops before committing leaves
nothing a user can see.

A new version branch commits these very operations (their upload is not
repeated); an existing branch commits its own, asked of that branch (the
objects are on the Hub by then, so none is sent twice). If the early send fails
(a repo this push has yet to create, a transient error), the push sends the
files again in its own time, with retries.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from urllib.parse import urlsplit

from publisher import state
from publisher.push.changes import LocalFile
from publisher.push.hub_client import HubClient, Upload


def place(endpoint: str, repo_id: str, branch: str) -> str:
    """Where a push goes, as the push record names it (the endpoint without any user or password)."""
    parts = urlsplit(endpoint)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{netloc}{f':{parts.port}' if parts.port else ''}{parts.path} {repo_id}@{branch}"


def published_from_here(build_dir: Path, variants: Iterable[str], where: str) -> bool:
    """Whether every one of these variants, exactly as built now, was published to `where`
    (endpoint, repo and branch) from this build folder: a push that is then most likely unchanged
    sends nothing early (an unchanged re-push sends no byte)."""
    entries = state.read_report(state.push_report_path(build_dir))["variants"]
    try:
        return all(where in _published(entries, name, state.variant_fingerprint(Path(build_dir) / name))
                   for name in variants)
    except OSError:
        return False


def _published(entries: dict, name: str, fingerprint: str) -> list[str]:
    """The places a variant with this fingerprint was published to, as recorded ([] for anything else)."""
    entry = entries.get(name)
    if not isinstance(entry, dict) or entry.get("fingerprint") != fingerprint:
        return []
    places = entry.get("published")
    return [p for p in places if isinstance(p, str)] if isinstance(places, list) else []


def record_published(build_dir: Path, variants: Iterable[str], where: str) -> None:
    """After a verified push: these variants, as they are now, are on `where`."""
    entries = state.read_report(state.push_report_path(build_dir))["variants"]
    update = {}
    for name in variants:
        fingerprint = state.variant_fingerprint(Path(build_dir) / name)
        places = _published(entries, name, fingerprint)
        # the newest places last, a bounded list (a build pushed to many repos, as a benchmark does)
        update[name] = {"fingerprint": fingerprint, "published": [p for p in places if p != where][-15:] + [where]}
    state.update_report(state.push_report_path(build_dir), update)


class EarlyUpload:
    def __init__(self, client: HubClient, repo_id: str, files: Iterable[LocalFile]):
        self._files = {f.repo_path: f for f in files}
        self._uploads = [Upload(f.repo_path, str(f.local_path), f.sha256) for f in self._files.values()]
        self._done: Future = Future()
        once = client.single_attempt()  # a failure is simply sent again later, with retries

        def run() -> None:
            try:
                self._done.set_result(once.upload(repo_id, self._uploads, "main"))
            except BaseException as err:  # noqa: BLE001 - the push sends the files again
                self._done.set_exception(err)

        # a daemon: a push that needs none of it (unchanged after all) does not wait for it at exit
        threading.Thread(target=run, name="publisher-early-upload", daemon=True).start()

    def wait(self) -> None:
        """Until the send has ended, whichever way (an existing branch's commit then finds the objects there)."""
        try:
            self._done.result()
        except BaseException:  # noqa: BLE001
            pass

    def operations(self, uploads: Iterable[Upload]) -> dict[str, object]:
        """path -> the sent operation, for those of `uploads` that are exactly what was sent
        (waits for the send; {} when it failed)."""
        try:
            sent = self._done.result()
        except BaseException:  # noqa: BLE001
            return {}
        by_path = {op.path_in_repo: op for op in sent}
        return {u.path_in_repo: by_path[u.path_in_repo] for u in uploads
                if u.path_in_repo in by_path and u.source == str(self._files[u.path_in_repo].local_path)
                and u.sha256 == self._files[u.path_in_repo].sha256}
