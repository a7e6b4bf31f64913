"""The job side: `python -m publisher.remote.job WORK KEY` runs inside a remote
job (after the bootstrap of remote/request.py installed this publisher there),
runs the stage its request names on the variants sent, and prints the result
as frames (remote/frames.py) at the end of the log. Its other output is the
job's progress, as the caller streams it."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from publisher import __version__, env, state
from publisher.remote import frames
from publisher.remote.request import JobRequest


def _say(line: str) -> None:
    print(line, flush=True)


def run_test(work: Path, request: JobRequest) -> dict:
    from publisher.options import TestOptions
    from publisher.project.load import require_project
    from publisher.testing.stage import run_tests

    project = require_project(work / "project")
    build_dir = work / "project" / "build"
    run = run_tests(project, build_dir, include=request.variants,
                    options=TestOptions(repo_id=request.repo_id, timeout=request.timeout,
                                        test_timeout=request.test_timeout, require_gpu=True,
                                        all_tests=request.all_tests),
                    matrix_path=(work / request.matrix) if request.matrix else None, on_progress=_say)
    report = state.read_report(state.test_report_path(build_dir))["variants"]
    return {"entries": {r.variant: report.get(r.variant, r.entry()) for r in run.results}}


def run_bench(work: Path, request: JobRequest) -> dict:
    from publisher.bench.stage import run_benchmarks
    from publisher.options import BenchOptions
    from publisher.project.load import require_project

    project = require_project(work / "project")
    options = BenchOptions(warmup=int(request.extra.get("warmup", 10)), iterations=int(request.extra.get("iterations", 100)),
                           timeout=request.timeout, repo_id=request.repo_id)
    run = run_benchmarks(project, work / "project" / "build", include=request.variants, options=options,
                         matrix_path=(work / request.matrix) if request.matrix else None, on_progress=_say)
    return {"results": {r.variant: r.report() for r in run.results}}


def run_build_job(work: Path, request: JobRequest) -> dict:
    """Build the requested variants with the local backend, then send each built one to the staging
    repository (PUBLISHER_STAGING, with the HF_TOKEN secret) for the caller to fetch and verify."""
    import os

    from huggingface_hub import HfApi

    from publisher.builder.scheduler import BUILT_STATES
    from publisher.builder.stage import run_build
    from publisher.options import BuildCommandOptions, Selection
    from publisher.ui import PlainLines

    project = work / "project"
    options = BuildCommandOptions(path=project, selection=Selection(request.variants), hub_cache=False,
                                  matrix_file=(work / request.matrix) if request.matrix else None)
    run = run_build(options, PlainLines(sys.stdout), note=_say)
    repo, path = env.job_staging()
    uploaded = {}
    api = HfApi(token=os.environ.get("HF_TOKEN") or False)
    for result in run.results:
        if result.state in BUILT_STATES and repo:
            _say(f"publisher job: sending {result.variant} to the staging repository")
            commit = api.upload_folder(repo_id=repo, repo_type="model", folder_path=str(project / "build" / result.variant),
                                       path_in_repo=f"{path}/out/{result.variant}",
                                       commit_message=f"publisher build of {result.variant}")
            uploaded[result.variant] = commit.oid
    return {"results": [r.as_dict() for r in run.results], "uploaded": uploaded}


KINDS = {"test": run_test, "bench": run_bench, "build": run_build_job}


def main(argv: list[str]) -> int:
    work, key = Path(argv[0]), argv[1]
    request = JobRequest.read(work / "requests" / f"{key}.json")
    _say(f"publisher job: publisher {__version__}, {request.kind} of {', '.join(request.variants)}")
    try:
        payload = KINDS[request.kind](work, request)
        payload.update(ok=True)
    except Exception as err:  # noqa: BLE001 - the caller must learn what happened, not see a silent job
        message = getattr(err, "message", None) or f"{type(err).__name__}: {err}"
        hint = getattr(err, "hint", None)
        if not hasattr(err, "message"):
            traceback.print_exc()
        payload = {"ok": False, "error": str(message), "hint": hint or ""}
    payload.update(kind=request.kind, publisher=__version__)
    for line in frames.encode(payload):
        _say(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
