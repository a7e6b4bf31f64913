"""The Jobs API routes, as huggingface_hub 2.x calls them (hf_api.py run_job,
list_jobs, inspect_job, cancel_job, fetch_job_logs, fetch_job_metrics,
rerun_job, update_job_labels, list_jobs_hardware):

    GET  /api/jobs/hardware                      the flavours (no token needed)
    POST /api/jobs/{ns}                          create -> JobInfo
    GET  /api/jobs/{ns}?stage=&label=k=v&cursor= list, newest first, Link rel="next" pages
    GET  /api/jobs/{ns}/{id}                     JobInfo
    POST /api/jobs/{ns}/{id}/cancel              -> JobInfo (the job is gone when it answers)
    POST /api/jobs/{ns}/{id}/duplicate           a new job from the same spec -> JobInfo
    PUT  /api/jobs/{ns}/{id}/labels              {"labels": {...}} replaces them -> JobInfo
    GET  /api/jobs/{ns}/{id}/logs?tail=N         SSE: `data: {"data": line, "timestamp": ...}` events,
                                                 the whole log (or its last N), then new lines until
                                                 the job ends; ": keep-alive" every 30 s of silence
    GET  /api/jobs/{ns}/{id}/metrics             SSE: `event: metric` samples every second while the
                                                 job runs; 406 once it has ended (as the Hub answers)

Creating, cancelling, duplicating and relabelling need a write token with the
job.write permission; reading needs any token of the namespace's owner."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from publisher.errors import HubError
from publisher.hub_server.jobs.board import Job
from publisher.hub_server.jobs.hardware import flavors
from publisher.hub_server.reply import Reply, json_reply

if TYPE_CHECKING:
    from publisher.hub_server.server import Handler

KEEP_ALIVE = 30.0  # seconds of silence before a keep-alive comment (the Hub's interval)
_STAGES = ("COMPLETED", "CANCELED", "ERROR", "DELETED", "RUNNING", "SCHEDULING")


def route(h: Handler, method: str, rest: list[str], need: Callable[[str], None]) -> tuple[str, Callable[[], Reply]]:
    if rest == ["hardware"]:
        need("GET")
        return "jobs-hardware", lambda: json_reply([f.to_api() for f in flavors().values()])
    if len(rest) == 1:
        need("GET POST")
        if method == "POST":
            return "jobs-create", lambda: _create(h, rest[0])
        return "jobs-list", lambda: _list(h, rest[0])
    if len(rest) == 2:
        need("GET")
        return "jobs-info", lambda: _info(h, rest[0], rest[1])
    if len(rest) == 3 and rest[2] in _JOB_OPS:
        namespace, job_id, op = rest
        method_allowed, endpoint = _JOB_OPS[op]
        need(method_allowed)
        return f"jobs-{op}", lambda: endpoint(h, namespace, job_id)
    raise HubError(404, "Not found")


def _board(h: Handler):
    return h.state.jobs


def _create(h: Handler, namespace: str) -> Reply:
    user = h.jobs_auth(namespace, write=True)
    body = h._json_body()
    if not isinstance(body, dict):
        raise HubError(400, "Expected a JSON object (the job spec)")
    job = _board(h).create(namespace, h.owner_type(namespace), user, body, h.can_read_repo)
    return json_reply(_board(h).info(job))


def _list(h: Handler, namespace: str) -> Reply:
    h.jobs_auth(namespace, write=False)
    stages = [s.upper() for s in h.query.get("stage", [])]
    for stage in stages:
        if stage not in _STAGES:
            raise HubError(400, f"stage: invalid value {stage!r}; expected one of {', '.join(_STAGES)}")
    labels = {}
    for item in h.query.get("label", []):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise HubError(400, f"label: invalid filter {item!r}; expected key=value")
        labels[key] = value
    jobs = _board(h).list(namespace, stages, labels)
    cursor = (h.query.get("cursor") or [None])[0]
    if cursor:
        ids = [j.record.id for j in jobs]
        if cursor not in ids:
            raise HubError(400, "cursor: unknown or expired pagination cursor")
        jobs = jobs[ids.index(cursor) + 1:]
    size = h.state.config.jobs_page_size
    page, more = jobs[:size], len(jobs) > size
    answer = json_reply([_board(h).info(j) for j in page])
    if more:
        params = [(k, v) for k, values in h.query.items() if k != "cursor" for v in values]
        params.append(("cursor", page[-1].record.id))
        answer.headers["Link"] = f'<{h.base}/api/jobs/{namespace}?{urlencode(params)}>; rel="next"'
    return answer


def _job(h: Handler, namespace: str, job_id: str, write: bool) -> tuple[str, Job]:
    user = h.jobs_auth(namespace, write=write)
    return user, _board(h).get(namespace, job_id)


def _info(h: Handler, namespace: str, job_id: str) -> Reply:
    _, job = _job(h, namespace, job_id, write=False)
    return json_reply(_board(h).info(job))


def _cancel(h: Handler, namespace: str, job_id: str) -> Reply:
    _, job = _job(h, namespace, job_id, write=True)
    _board(h).cancel(job)
    return json_reply(_board(h).info(job))


def _duplicate(h: Handler, namespace: str, job_id: str) -> Reply:
    user, job = _job(h, namespace, job_id, write=True)
    return json_reply(_board(h).info(_board(h).duplicate(job, user, h.can_read_repo)))


def _labels(h: Handler, namespace: str, job_id: str) -> Reply:
    _, job = _job(h, namespace, job_id, write=True)
    body = h._json_body()
    if not isinstance(body, dict) or "labels" not in body:
        raise HubError(400, 'Expected a JSON object: {"labels": {"key": "value", ...}}')
    _board(h).set_labels(job, body.get("labels"))
    return json_reply(_board(h).info(job))


def _no_expose(h: Handler, namespace: str, job_id: str) -> Reply:
    raise HubError(400, "expose: exposed ports (the Hub's jobs proxy) are not supported by this Hub-compatible server")


def _sse(stream: Iterator[bytes]) -> Reply:
    return Reply(200, b"", {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}, stream=stream)


def _logs(h: Handler, namespace: str, job_id: str) -> Reply:
    _, job = _job(h, namespace, job_id, write=False)
    raw = (h.query.get("tail") or [None])[0]
    tail = None
    if raw is not None:
        if not raw.isdigit():
            raise HubError(400, f"tail: expected a whole number, got {raw!r}")
        tail = int(raw)

    def events() -> Iterator[bytes]:
        position = job.log.start(tail)
        while True:
            batch, position, closed = job.log.read(position, KEEP_ALIVE)
            if batch:
                yield b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in batch)
            elif closed:
                return
            else:
                yield b": keep-alive\n\n"

    return _sse(events())


def _metrics(h: Handler, namespace: str, job_id: str) -> Reply:
    _, job = _job(h, namespace, job_id, write=False)
    if job.done:
        raise HubError(406, f"Job {job_id} is not running (stage {job.record.stage}): it has no live metrics")

    def samples() -> Iterator[bytes]:
        quiet = 0.0
        while not job.done:
            sample = _board(h).sample(job) if job.record.stage == "RUNNING" else None
            if sample is not None:
                quiet = 0.0
                yield b"event: metric\ndata: " + json.dumps(sample).encode() + b"\n\n"
            elif quiet >= KEEP_ALIVE:
                quiet = 0.0
                yield b": keep-alive\n\n"
            time.sleep(1.0)
            quiet += 1.0

    return _sse(samples())


# /api/jobs/{ns}/{id}/<op>: the method it takes, the endpoint
_JOB_OPS: dict[str, tuple[str, Callable[[Handler, str, str], Reply]]] = {
    "cancel": ("POST", _cancel), "duplicate": ("POST", _duplicate), "labels": ("PUT", _labels),
    "logs": ("GET", _logs), "metrics": ("GET", _metrics), "expose": ("PUT", _no_expose),
}
