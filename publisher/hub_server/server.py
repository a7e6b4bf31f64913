"""A Hub-compatible HTTP server (UPSTREAM.md section 6) for tests and local dry
runs: the real `huggingface_hub` and `kernels` clients talk to it as to the Hub
(with HF_HUB_DISABLE_XET=1: it speaks plain LFS, not Xet).

Standard library only (ThreadingHTTPServer). Listens on 127.0.0.1.
It also answers the Jobs API (jobs/api.py), running each job with the executor
named in ServerConfig.jobs_executor (jobs/executor.py).
Besides the Hub API it has two admin endpoints for tests:
  /_admin/faults   POST a rule (see faults.py), GET pending rules, DELETE all
  /_admin/stats    GET request counts and request-body bytes per endpoint, DELETE to reset
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from publisher import env
from publisher.errors import ConnectionDropped, HubError
from publisher.hub_server.faults import FaultRule, Faults
from publisher.hub_server.jobs import api as jobs_api
from publisher.hub_server.jobs.board import JobBoard, object_id
from publisher.hub_server.jobs.executor import DEFAULT_EXECUTOR, EXECUTORS
from publisher.hub_server.reply import Reply
from publisher.hub_server.reply import json_reply as _json
from publisher.hub_server.storage import REPO_TYPES, Entry, Repo, Storage, lfs_pointer

_PREFIXES = {"datasets": "dataset", "spaces": "space", "kernels": "kernel"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}
_CHUNK = 1024 * 1024


# Token roles. "write" is a classic write token (it may also run Jobs: job.write);
# "write-no-jobs" a fine-grained token with repository write access but without
# job.write, as most tokens made before Jobs are; "read" a read-only token.
ROLES = ("write", "write-no-jobs", "read")
_REPO_WRITERS = ("write", "write-no-jobs")
_JOB_WRITERS = ("write",)
_ORG_JOB_WRITERS = ("admin", "write", "contributor")  # roleInOrg values that may run an org's jobs


@dataclass(frozen=True)
class ServerConfig:
    """tokens: token -> a role of ROLES. trusted_orgs: orgs whose overview says
    trustedKernelPublisher (none unless named, as on the Hub, which marks few);
    `user` is a user account, which has no org overview. orgs: the user's orgs -> roleInOrg.
    jobs_executor: where jobs run (a name of jobs.executor.EXECUTORS); jobs_dir:
    their folders (None: <data dir>/jobs)."""

    tokens: Mapping[str, str] = field(default_factory=dict)
    trusted_orgs: frozenset[str] = frozenset()
    user: str = "publisher-dev"
    orgs: Mapping[str, str] = field(default_factory=dict)
    latency: float = 0.0  # seconds added to every answer: a Hub across a network, for benchmarks
    jobs_executor: str = DEFAULT_EXECUTOR
    jobs_dir: Path | None = None
    jobs_page_size: int = 50  # jobs per page of GET /api/jobs/{namespace}

    def __post_init__(self):
        unknown = sorted({r for r in self.tokens.values() if r not in ROLES})
        if unknown:
            raise ValueError(f"unknown token role(s) {', '.join(unknown)}; one of {', '.join(ROLES)}")
        if self.jobs_executor not in EXECUTORS:
            raise ValueError(f"unknown jobs executor {self.jobs_executor!r}; one of {', '.join(EXECUTORS)}")


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class HubState:
    """What the request handlers share: storage, auth, faults, counters."""

    def __init__(self, storage: Storage, config: ServerConfig):
        self.storage = storage
        self.config = config
        self.jobs: JobBoard | None = None  # set by HubServer once the address is known
        self.faults = Faults()
        self.secret = secrets.token_bytes(16)
        self._stats_lock = threading.Lock()
        self.requests: dict[str, int] = {}  # answered (or dropped) requests
        self.arrivals: dict[str, int] = {}  # requests routed, before any work or delay
        self.bytes_in: dict[str, int] = {}

    def arrive(self, kind: str) -> None:
        with self._stats_lock:
            self.arrivals[kind] = self.arrivals.get(kind, 0) + 1

    def count(self, kind: str, nbytes: int) -> None:
        with self._stats_lock:
            self.requests[kind] = self.requests.get(kind, 0) + 1
            self.bytes_in[kind] = self.bytes_in.get(kind, 0) + nbytes

    def stats(self) -> dict:
        with self._stats_lock:
            return {
                "requests": dict(self.requests),
                "arrivals": dict(self.arrivals),
                "bytes_in": dict(self.bytes_in),
                "bytes_in_total": sum(self.bytes_in.values()),
            }

    def reset_stats(self) -> None:
        with self._stats_lock:
            self.requests.clear()
            self.arrivals.clear()
            self.bytes_in.clear()

    def ticket(self, repo: Repo, oid: str, size: int) -> str:
        return hmac.new(self.secret, f"{repo.type}/{repo.id}/{oid}/{size}".encode(), hashlib.sha256).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "publisher-hub/1"
    # headers and body leave in two writes; with Nagle on, the body waits for the
    # client's delayed ACK of the headers (40 ms a request on Linux), a cost the Hub does not have
    disable_nagle_algorithm = True
    state: HubState  # set on the subclass made by make_server

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - signature of the base class
        if env.hub_server_log():
            super().log_message(format, *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- plumbing ------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        self._body_read = 0
        self._body_done = False
        split = urlsplit(self.path)
        self.query = parse_qs(split.query)
        self.base = f"http://{self.headers.get('Host', '127.0.0.1')}"
        kind, action = "unknown", None
        try:
            if self.state.config.latency:  # every answer, a 404 included
                time.sleep(self.state.config.latency)
            kind, action = self._route(method, [s for s in split.path.split("/") if s])
            self.state.arrive(kind)
            rule = self.state.faults.take(kind)
            if rule is not None and rule.action == "delay":
                time.sleep(rule.seconds)
                rule = None
            if rule is not None and rule.action != "drop-after":
                self._inject(rule, kind)
                return
            reply = action()
            if rule is not None:  # drop-after: the work is done, the answer is lost
                raise ConnectionDropped()
        except ConnectionDropped:
            self._drain_quietly()
            self.state.count(kind, self._body_read)
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        except HubError as err:
            reply = self._error(err)
        except (ValueError, KeyError, json.JSONDecodeError) as err:
            reply = self._error(HubError(400, f"Bad request: {err}"))
        self._drain_quietly()
        self.state.count(kind, self._body_read)
        self._send(reply, head=method == "HEAD")

    def _inject(self, rule: FaultRule, kind: str) -> None:
        if rule.action == "drop":
            # Read part of the body (a transfer cut in the middle), then hang up.
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self._read(max(1, length // 2))
            raise ConnectionDropped()
        self._drain_quietly()
        self.state.count(kind, self._body_read)
        self._send(self._error(HubError(rule.status, f"Injected fault: {kind} answers {rule.status}")), head=False)

    def _error(self, err: HubError) -> Reply:
        # a header is latin-1: what it cannot carry is replaced there (the JSON body keeps the whole message)
        header = err.message.replace("\n", " ").encode("latin-1", "replace").decode("latin-1")
        headers = {"X-Error-Message": header}
        if err.code:
            headers["X-Error-Code"] = err.code
        return _json({"error": err.message}, err.status, headers)

    def _send(self, reply: Reply, head: bool) -> None:
        body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        headers = dict(reply.headers)
        if reply.stream is None:
            headers.setdefault("Content-Length", str(len(body)))
        elif "Content-Length" not in headers:  # an event stream: its end is the connection's
            headers["Connection"] = "close"
            self.close_connection = True
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if head:
            return
        if reply.stream is not None:
            try:
                for chunk in reply.stream:
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError):  # the client went away mid-stream
                self.close_connection = True
            finally:
                close = getattr(reply.stream, "close", None)
                if close is not None:
                    close()
        else:
            self.wfile.write(body)

    def _body_chunks(self) -> Iterator[bytes]:
        """The request body, Content-Length or chunked, as it arrives."""
        if self._body_done:
            return
        self._body_done = True
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return
                yield from self._exactly(size)
                self.rfile.readline(3)
        else:
            yield from self._exactly(int(self.headers.get("Content-Length") or 0))

    def _exactly(self, remaining: int) -> Iterator[bytes]:
        """`remaining` bytes of the body, in chunks; a short read is a dropped connection."""
        while remaining:
            chunk = self.rfile.read(min(remaining, _CHUNK))
            if not chunk:
                raise ConnectionDropped()
            remaining -= len(chunk)
            self._body_read += len(chunk)
            yield chunk

    def _read(self, limit: int) -> bytes:
        data = b""
        for chunk in self._body_chunks():
            data += chunk
            if len(data) >= limit:
                break
        return data

    def _body(self) -> bytes:
        return b"".join(self._body_chunks())

    def _json_body(self) -> dict:
        raw = self._body()
        return json.loads(raw) if raw.strip() else {}

    def _drain_quietly(self) -> None:
        try:
            for _ in self._body_chunks():
                pass
        except (ConnectionDropped, OSError, ValueError):
            self.close_connection = True

    # -- auth ----------------------------------------------------------------
    def _token(self) -> str | None:
        value = self.headers.get("Authorization") or ""
        token = value[7:].strip() if value.lower().startswith("bearer ") else None
        if token and token not in self.state.config.tokens:
            raise HubError(401, "Invalid credentials in Authorization header")
        return token or None

    def _require_write(self) -> None:
        token = self._token()
        if token is None:
            raise HubError(401, "Authorization required: this operation needs a token with write access")
        if self.state.config.tokens[token] not in _REPO_WRITERS:
            raise HubError(403, "Your token is read-only: you don't have the rights to write to this repository")

    def jobs_auth(self, namespace: str, write: bool) -> str:
        """The user acting on `namespace`'s jobs; 401 without a token, 403 (naming the
        missing permission, as the Hub does) for a namespace or an action the token may not touch."""
        token = self._token()
        if token is None:
            raise HubError(401, "Authorization required: the Jobs API needs a token (Authorization: Bearer hf_...)")
        config = self.state.config
        refused = f"You don't have the required permissions to complete this action on namespace {namespace}"
        if namespace != config.user and namespace not in config.orgs:
            raise HubError(403, refused + (", missing permissions: job.write" if write else ""))
        if write and (config.tokens[token] not in _JOB_WRITERS
                      or namespace in config.orgs and config.orgs[namespace] not in _ORG_JOB_WRITERS):
            raise HubError(403, refused + ", missing permissions: job.write")
        return config.user

    def owner_type(self, namespace: str) -> str:
        return "user" if namespace == self.state.config.user else "org"

    def can_read_repo(self, repo: Repo) -> bool:
        """Whether this request's token may read `repo` (a private one needs a token)."""
        return not repo.private or self._token() is not None

    def _repo(self, repo_type: str, repo_id: str, write: bool = False) -> Repo:
        if write:
            self._require_write()
        token = self._token()
        repo = self.state.storage.get(repo_type, repo_id)
        if repo.private and token is None:
            raise HubError(401, f"Repository Not Found: {repo_id} (private)", "RepoNotFound")
        return repo

    # -- routing ---------------------------------------------------------------
    def _route(self, method: str, seg: list[str]) -> tuple[str, Callable[[], Reply]]:
        def need(allowed: str) -> None:
            if method not in allowed.split():
                raise HubError(405, f"{method} not allowed here")

        if seg[:1] == ["_admin"]:
            return "admin", lambda: self._admin(method, seg[1:])
        if seg[:1] == ["_lfs"] and len(seg) == 5:
            need("PUT")
            return "lfs-put", lambda: self._lfs_put(seg[1], f"{seg[2]}/{seg[3]}", seg[4])
        if seg[:1] == ["api"]:
            rest = seg[1:]
            if rest == ["repos", "create"]:
                need("POST")
                return "create-repo", self._create_repo
            if rest == ["whoami-v2"]:
                return "whoami", self._whoami
            if rest[:1] == ["jobs"] and len(rest) > 1:
                return jobs_api.route(self, method, rest[1:], need)
            if rest == ["agent-harnesses"]:  # huggingface_hub fetches it once a day (its agent detection)
                need("GET")
                return "agent-harnesses", lambda: _json({"standardEnvVars": [], "harnesses": {}})
            if rest == ["validate-yaml"]:
                need("POST")
                return "validate-yaml", self._validate_yaml
            if len(rest) == 3 and rest[0] == "organizations" and rest[2] == "overview":
                return "overview", lambda: self._overview(unquote(rest[1]))
            if len(rest) >= 3 and rest[0].endswith("s") and rest[0][:-1] in REPO_TYPES:
                return self._route_repo_api(method, rest[0][:-1], f"{rest[1]}/{rest[2]}", rest[3:], need)
            raise HubError(404, "Not found")
        repo_type = _PREFIXES.get(seg[0], "model") if seg else "model"
        rest = seg[1:] if seg and seg[0] in _PREFIXES else seg
        if len(rest) == 6 and rest[1].endswith(".git") and rest[2:] == ["info", "lfs", "objects", "batch"]:
            need("POST")
            return "lfs-batch", lambda: self._lfs_batch(repo_type, f"{rest[0]}/{rest[1][:-4]}")
        if len(rest) >= 5 and rest[2] == "resolve":
            need("GET HEAD")
            return "resolve", lambda: self._resolve(repo_type, f"{rest[0]}/{rest[1]}", unquote(rest[3]),
                                                    unquote("/".join(rest[4:])), method)
        raise HubError(404, "Not found")

    def _route_repo_api(self, method, repo_type, repo_id, rest, need) -> tuple[str, Callable[[], Reply]]:
        op = rest[0] if rest else ""
        arg = unquote(rest[1]) if len(rest) > 1 else None
        if not rest or (op == "revision" and arg):
            need("GET")
            return "info", lambda: self._info(repo_type, repo_id, arg)
        if op == "refs":
            return "refs", lambda: self._refs(repo_type, repo_id)
        if op == "branch" and arg:
            need("POST DELETE")
            return "branch" if method == "POST" else "branch-delete", lambda: self._branch(method, repo_type, repo_id, arg)
        if op == "tag" and arg:
            need("POST DELETE")
            return "tag", lambda: self._tag(method, repo_type, repo_id, arg)
        if op == "preupload" and arg:
            need("POST")
            return "preupload", lambda: self._preupload(repo_type, repo_id, arg)
        if op == "commit" and arg:
            need("POST")
            return "commit", lambda: self._commit(repo_type, repo_id, arg)
        if op == "tree" and arg:
            return "tree", lambda: self._tree(repo_type, repo_id, arg, unquote("/".join(rest[2:])))
        if op == "paths-info" and arg:
            need("POST")
            return "paths-info", lambda: self._paths_info(repo_type, repo_id, arg)
        if op == "commits" and arg:
            return "commits", lambda: self._commits(repo_type, repo_id, arg)
        raise HubError(404, "Not found")

    # -- endpoints -------------------------------------------------------------
    def _repo_url(self, repo: Repo) -> str:
        return f"{self.base}/{_URL_PREFIX[repo.type]}{repo.id}"

    def _create_repo(self) -> Reply:
        self._require_write()
        body = self._json_body()
        repo_type = body.get("type") or "model"
        name, org = body.get("name"), body.get("organization") or self.state.config.user
        repo_id = f"{org}/{name}"
        private = body.get("private", body.get("visibility") == "private")
        created = self.state.storage.create(repo_type, repo_id, bool(private))
        repo = self.state.storage.get(repo_type, repo_id)
        url = {"url": self._repo_url(repo), "name": repo_id, "id": repo_id}
        if not created:
            return _json({**url, "error": "You already created this repo"}, 409,
                         {"X-Error-Message": "You already created this repo"})
        return _json(url)

    def _whoami(self) -> Reply:
        token = self._token()
        if token is None:
            raise HubError(401, "Authorization required")
        role = self.state.config.tokens[token]
        user = self.state.config.user
        orgs = [{"type": "org", "name": name, "roleInOrg": in_org} for name, in_org in self.state.config.orgs.items()]
        access: dict = {"displayName": "token", "role": role}
        if role == "write-no-jobs":  # what the Hub shows for a fine-grained token without job.write
            scoped = [{"entity": {"_id": object_id(name), "type": kind, "name": name},
                       "permissions": ["repo.content.read", "repo.write"]}
                      for kind, name in [("user", user), *(("org", o) for o in self.state.config.orgs)]]
            access = {"displayName": "token", "role": "fineGrained", "fineGrained": {"scoped": scoped, "global": []}}
        return _json({"type": "user", "name": user, "orgs": orgs, "auth": {"type": "access_token", "accessToken": access}})

    def _validate_yaml(self) -> Reply:
        content = str(self._json_body().get("content", ""))
        errors = []
        if content.startswith("---"):
            import yaml

            front = content[3:].split("\n---", 1)[0]
            try:
                data = yaml.safe_load(front)
                if data is not None and not isinstance(data, dict):
                    errors.append({"message": "YAML metadata must be a mapping"})
            except yaml.YAMLError as err:
                errors.append({"message": f"invalid YAML: {err}"})
        return _json({"errors": errors, "warnings": []}, 400 if errors else 200)

    def _overview(self, org: str) -> Reply:
        """Every namespace but the user's is an org here; the Hub answers a user account's name with 404."""
        config = self.state.config
        if org == config.user:
            raise HubError(404, f"Organization {org} not found")
        return _json({"name": org, "fullname": org, "avatarUrl": "", "isFollowing": False, "numUsers": 1,
                      "trustedKernelPublisher": org in config.trusted_orgs})

    def _info(self, repo_type: str, repo_id: str, revision: str | None) -> Reply:
        repo = self._repo(repo_type, repo_id)
        commit = repo.resolve(revision or "main")
        files = repo.files(commit)
        blobs = (self.query.get("blobs") or [""])[0].lower() in ("true", "1")
        siblings = [self._sibling(repo, p, e, blobs) for p, e in sorted(files.items())]
        meta = repo.commit_meta(commit)
        return _json({
            "_id": hashlib.sha1(f"{repo.type}/{repo.id}".encode()).hexdigest()[:24], "id": repo.id,
            "author": repo.id.split("/")[0], "sha": commit, "private": repo.private, "gated": False,
            "disabled": False, "downloads": 0, "likes": 0, "tags": [], "siblings": siblings,
            "lastModified": _iso(meta.time), "createdAt": _iso(repo.history(commit)[-1].time),
        })

    def _sibling(self, repo: Repo, path: str, entry: Entry, blobs: bool) -> dict:
        item: dict = {"rfilename": path}
        if blobs:
            item.update(size=entry.size, blobId=entry.blob)
            if entry.lfs_oid:
                item["lfs"] = {"sha256": entry.lfs_oid, "size": entry.size,
                               "pointerSize": len(lfs_pointer(entry.lfs_oid, entry.size))}
        return item

    def _refs(self, repo_type: str, repo_id: str) -> Reply:
        repo = self._repo(repo_type, repo_id)
        refs = repo.refs()

        def items(kind: str, prefix: str) -> list[dict]:
            return [{"name": n, "ref": f"{prefix}{n}", "targetCommit": c} for n, c in sorted(refs[kind].items())]

        data = {"branches": items("heads", "refs/heads/"), "tags": items("tags", "refs/tags/"), "converts": []}
        if self.query.get("include_prs"):
            data["pullRequests"] = items("prs", "refs/pr/")
        return _json(data)

    def _branch(self, method: str, repo_type: str, repo_id: str, name: str) -> Reply:
        repo = self._repo(repo_type, repo_id, write=True)
        if method == "DELETE":
            repo.delete_branch(name)
        else:
            repo.create_branch(name, self._json_body().get("startingPoint"))
        return _json({})

    def _tag(self, method: str, repo_type: str, repo_id: str, arg: str) -> Reply:
        repo = self._repo(repo_type, repo_id, write=True)
        if method == "DELETE":
            raise HubError(405, "Deleting tags is not supported by this server")
        body = self._json_body()
        repo.create_tag(str(body["tag"]), arg)
        return _json({})

    def _preupload(self, repo_type: str, repo_id: str, revision: str) -> Reply:
        repo = self._repo(repo_type, repo_id, write=True)
        files = repo.files(repo.resolve(revision))
        out = []
        for item in self._json_body().get("files", []):
            path = str(item["path"])
            sample = base64.b64decode(item.get("sample") or "")
            entry = files.get(path)
            answer = {"path": path, "uploadMode": repo.upload_mode(files, path, int(item["size"]), sample),
                      "shouldIgnore": False}
            if entry is not None:
                answer["oid"] = entry.etag
            out.append(answer)
        return _json({"files": out, "commitOid": repo.resolve(revision)})

    def _lfs_batch(self, repo_type: str, repo_id: str) -> Reply:
        repo = self._repo(repo_type, repo_id, write=True)
        body = self._json_body()
        if body.get("operation") != "upload":
            raise HubError(400, "Only the upload operation is supported")
        objects = []
        for obj in body.get("objects", []):
            oid, size = str(obj["oid"]), int(obj["size"])
            item: dict = {"oid": oid, "size": size, "authenticated": True}
            if not repo.has_lfs(oid):
                href = (f"{self.base}/_lfs/{repo.type}/{repo.id}/{oid}"
                        f"?size={size}&ticket={self.state.ticket(repo, oid, size)}")
                item["actions"] = {"upload": {"href": href, "expires_in": 3600}}
            objects.append(item)
        return Reply(200, json.dumps({"transfer": "basic", "objects": objects}).encode(),
                     {"Content-Type": "application/vnd.git-lfs+json"})

    def _lfs_put(self, repo_type: str, repo_id: str, oid: str) -> Reply:
        repo = self.state.storage.get(repo_type, repo_id)
        size = int((self.query.get("size") or ["-1"])[0])
        ticket = (self.query.get("ticket") or [""])[0]
        if not hmac.compare_digest(ticket, self.state.ticket(repo, oid, size)):
            raise HubError(403, "Invalid or expired upload URL")
        repo.lfs_put(oid, size, self._body_chunks())
        return Reply(200, b"", {"ETag": f'"{oid}"'})

    def _commit(self, repo_type: str, repo_id: str, revision: str) -> Reply:
        repo = self._repo(repo_type, repo_id, write=True)
        lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first line of a commit must be its header")
        operations = [(str(line["key"]), dict(line.get("value") or {})) for line in lines[1:]]
        create_pr = (self.query.get("create_pr") or ["0"])[0] in ("1", "true")
        commit, pr = repo.apply_commit(revision, dict(lines[0].get("value") or {}), operations, create_pr)
        url = self._repo_url(repo)
        return _json({"success": True, "commitOid": commit, "commitUrl": f"{url}/commit/{commit}",
                      "pullRequestUrl": f"{url}/discussions/{pr}" if pr else None})

    def _tree_entries(self, repo: Repo, commit: str, paths: list[str], recursive: bool) -> list[dict]:
        files = repo.files(commit)
        dirs = repo.folders(commit)
        out = []
        for base in paths:
            base = base.strip("/")
            if base and base in files:
                out.append(self._file_entry(base, files[base]))
                continue
            if base and base not in dirs:
                continue
            prefix = base + "/" if base else ""
            for path in sorted(set(files) | set(dirs)):
                if not path.startswith(prefix) or path == base:
                    continue
                if not recursive and "/" in path[len(prefix):]:
                    continue
                out.append(self._file_entry(path, files[path]) if path in files
                           else {"type": "directory", "oid": dirs[path], "size": 0, "path": path})
        return out

    def _file_entry(self, path: str, entry: Entry) -> dict:
        item: dict = {"type": "file", "oid": entry.blob, "size": entry.size, "path": path}
        if entry.lfs_oid:
            item["lfs"] = {"oid": entry.lfs_oid, "size": entry.size,
                           "pointerSize": len(lfs_pointer(entry.lfs_oid, entry.size))}
        return item

    def _tree(self, repo_type: str, repo_id: str, revision: str, path: str) -> Reply:
        repo = self._repo(repo_type, repo_id)
        commit = repo.resolve(revision)
        path = path.strip("/")
        if path and path not in repo.folders(commit):
            raise HubError(404, f"Entry not found: {path} is not a folder at {revision}", "EntryNotFound")
        recursive = (self.query.get("recursive") or ["false"])[0].lower() in ("true", "1")
        return _json(self._tree_entries(repo, commit, [path], recursive))

    def _paths_info(self, repo_type: str, repo_id: str, revision: str) -> Reply:
        repo = self._repo(repo_type, repo_id)
        commit = repo.resolve(revision)
        raw = self._body().decode()
        if (self.headers.get("Content-Type") or "").startswith("application/json"):
            paths = list(json.loads(raw).get("paths", []))
        else:
            paths = parse_qs(raw).get("paths", [])
        files, dirs = repo.files(commit), repo.folders(commit)
        out = [self._file_entry(p, files[p]) if p in files else {"type": "directory", "oid": dirs[p], "path": p}
               for p in (q.strip("/") for q in paths) if p in files or p in dirs]
        return _json(out)

    def _commits(self, repo_type: str, repo_id: str, revision: str) -> Reply:
        repo = self._repo(repo_type, repo_id)
        return _json([
            {"id": m.oid, "title": m.title, "message": m.message, "date": _iso(m.time),
             "authors": [{"user": "publisher-hub"}]}
            for m in repo.history(repo.resolve(revision))
        ])

    def _resolve(self, repo_type: str, repo_id: str, revision: str, path: str, method: str) -> Reply:
        repo = self._repo(repo_type, repo_id)
        commit = repo.resolve(revision)
        entry = repo.files(commit).get(path)
        if entry is None:
            err = self._error(HubError(404, f"Entry not found: {path}", "EntryNotFound"))
            err.headers["X-Repo-Commit"] = commit
            return err
        headers = {"X-Repo-Commit": commit, "ETag": f'"{entry.etag}"', "Accept-Ranges": "bytes",
                   "Content-Type": "application/octet-stream",
                   "Content-Disposition": f'inline; filename="{quote(path.rsplit("/", 1)[-1])}"'}
        if entry.lfs_oid:
            headers.update({"X-Linked-Etag": f'"{entry.lfs_oid}"', "X-Linked-Size": str(entry.size)})
        start, end, status = 0, entry.size - 1, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and entry.size:
            first, _, last = rng[6:].split(",")[0].partition("-")
            start = int(first or 0)
            end = min(int(last), entry.size - 1) if last else entry.size - 1
            if start > end:
                return Reply(416, b"", {"Content-Range": f"bytes */{entry.size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
        headers["Content-Length"] = str(max(0, end - start + 1))
        if method == "HEAD":
            return Reply(status, b"", headers)
        return Reply(status, b"", headers, stream=self._file_stream(repo, entry, start, end - start + 1))

    @staticmethod
    def _file_stream(repo: Repo, entry: Entry, start: int, length: int) -> Iterator[bytes]:
        with repo.open(entry) as fh:
            fh.seek(start)
            while length > 0:
                chunk = fh.read(min(length, _CHUNK))
                if not chunk:
                    return
                length -= len(chunk)
                yield chunk

    def _admin(self, method: str, rest: list[str]) -> Reply:
        if rest == ["faults"]:
            if method == "POST":
                body = self._json_body()
                try:
                    self.state.faults.add(**body)
                except (TypeError, ValueError) as err:
                    raise HubError(400, str(err)) from None
            elif method == "DELETE":
                self.state.faults.clear()
            return _json({"pending": self.state.faults.pending()})
        if rest == ["stats"]:
            if method == "DELETE":
                self.state.reset_stats()
            return _json(self.state.stats())
        raise HubError(404, "Not found")


class HubServer:
    """A running server: `url`, `state` (storage, faults, stats), `close()`."""

    def __init__(self, data_dir: Path, config: ServerConfig | None = None, port: int = 0, host: str = "127.0.0.1"):
        config = config or ServerConfig()
        self.state = HubState(Storage(Path(data_dir)), config)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.state.jobs = JobBoard(config.jobs_dir or Path(data_dir) / "jobs", self.state.storage,
                                   config.jobs_executor, self.url, config.user)
        self._thread: threading.Thread | None = None

    def start(self) -> HubServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="hub-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop_jobs(self) -> int:
        """Stop every running job (its processes or containers killed); how many there were."""
        assert self.state.jobs is not None
        return self.state.jobs.close()

    def close(self) -> None:
        self.stop_jobs()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
