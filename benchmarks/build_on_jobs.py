"""`publisher build` here vs `publisher build --on hf-jobs:FLAVOUR` (one job per variant), against
`publisher hub-server --jobs-executor process`: its jobs run on this machine, on the same cores, so
the ratio is the cost of going through jobs (staging, a venv and the wheel per job, the upload and the
digest-checked download), not the gain of a flavour's cores.

    .venv/bin/python benchmarks/build_on_jobs.py PROJECT --matrix MATRIX [--max-parallel N]

(benchmarks/build_on_jobs_matrix.yaml: the cells this development machine can build.)

PROJECT is copied to a temporary folder (unmodified). A first local build makes the toolchains
(not timed: the jobs of the process executor find them in the same cache); then, each in a fresh
process as a user runs it: a local build into a fresh build folder, the build through jobs, and the
same build through jobs again (nothing changed: no job should start).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOKEN = "hf_" + "J" * 34


def _build(args: list[str], env: dict) -> tuple[float, dict]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "publisher", "build", *args, "--json"], env=env, capture_output=True,
                         text=True)
    elapsed = time.perf_counter() - start
    try:
        variants = {v["variant"]: v for v in json.loads(out.stdout)["variants"]}
    except (ValueError, KeyError):
        raise SystemExit(f"publisher build {' '.join(args)} gave no result:\n{out.stderr[-3000:]}") from None
    return elapsed, variants


def _serve(folder: Path) -> tuple[subprocess.Popen, str]:
    """The hub-server with the process executor; its jobs find Debian's python3 and this torch."""
    import torch

    bin_dir = folder / "job-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(Path(torch.__file__).parents[1]))
    env.pop("HF_TOKEN", None)
    log = folder / "server.log"
    proc = subprocess.Popen([sys.executable, "-m", "publisher", "hub-server", "--port", "0", "--data-dir",
                             str(folder / "hub"), "--token", TOKEN, "--jobs-executor", "process"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:\d+", log.read_text())
        if found:
            return proc, found.group(0)
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the hub-server did not start:\n{log.read_text()[-2000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--matrix", type=Path, required=True)
    parser.add_argument("--max-parallel", type=int)
    parser.add_argument("--flavour", default="cpu-upgrade")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="build-on-jobs-") as tmp:
        folder = Path(tmp)
        project = folder / args.project.name
        shutil.copytree(args.project, project, ignore=shutil.ignore_patterns("build"))
        matrix = ["--matrix", str(args.matrix.resolve()), "--no-hub-cache"]
        env = dict(os.environ)
        _build([str(project), *matrix, "--out", str(folder / "warm")], env)
        local_s, local = _build([str(project), *matrix, "--out", str(folder / "local")], env)
        server, url = _serve(folder)
        try:
            env.update(HF_ENDPOINT=url, HF_TOKEN=TOKEN, HF_HUB_DISABLE_XET="1")
            on = ["--on", f"hf-jobs:{args.flavour}"] + (["--max-parallel", str(args.max_parallel)]
                                                         if args.max_parallel else [])
            jobs_s, jobs = _build([str(project), *matrix, *on], env)
            again_s, again = _build([str(project), *matrix, *on], env)
        finally:
            os.killpg(server.pid, 15)
            server.wait(60)
    cores = len(os.sched_getaffinity(0))
    print(f"{args.project.name}: {len(local)} variant(s), {cores} cores, jobs on the same machine "
          f"(--max-parallel {args.max_parallel or len(local)})\n")
    print("| build | wall (s) | per variant: state, seconds |")
    print("|---|---|---|")
    for label, seconds, variants in [("local", local_s, local), (f"--on hf-jobs:{args.flavour}", jobs_s, jobs),
                                     ("--on again, nothing changed", again_s, again)]:
        rows = ", ".join(f"{name} {v['state']} {v.get('seconds', 0):.1f}" for name, v in variants.items())
        print(f"| {label} | {seconds:.1f} | {rows} |")
    print(f"\nratio jobs/local: {jobs_s / local_s:.2f}")
    ok = all(v["state"] == "built" for v in local.values()) and all(v["state"] == "built-remote" for v in jobs.values()) \
        and all(v["state"] == "cached" for v in again.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
