"""`publisher build` compiling a variant vs fetching it from the Hub cache
(the version branch already holds it, built from the same inputs), against the
Hub-compatible server on 127.0.0.1.

    .venv/bin/python benchmarks/hub_cache.py [PROJECT] [--variant GLOB]

PROJECT (default: kernel_projects/rmsnorm) is copied to a temporary folder,
built with `--local` (compiled), pushed, then built again in a fresh build
folder twice: with the hub cache (fetched) and with --no-hub-cache (compiled
again, objects not reused). Each step runs in a fresh process, as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from publisher.hub_server.server import HubServer, ServerConfig

TOKEN = "hf_" + "C" * 34
REPO = "bench-cache/kernel"


def _run(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "publisher", *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"publisher {' '.join(args[:2])} failed:\n{result.stderr[-3000:]}")
    return elapsed, result


def _states(result: subprocess.CompletedProcess) -> str:
    return ", ".join(f"{r['variant']}: {r['state']}" for r in json.loads(result.stdout)["variants"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("project", nargs="?", default="kernel_projects/rmsnorm")
    parser.add_argument("--variant", default="*", help="variants to build (default: every --local one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(Path(args.project), project, ignore=shutil.ignore_patterns("build", "__pycache__"))
        # the hub cache fetches only from a publisher the user trusts: here, one the server marks trusted
        server = HubServer(Path(tmp) / "hub", ServerConfig(tokens={TOKEN: "write"},
                                                            trusted_orgs=frozenset({REPO.split("/")[0]}))).start()
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
        env.update(HF_ENDPOINT=server.url, HF_HUB_DISABLE_XET="1", HF_TOKEN=TOKEN, HF_HOME=str(Path(tmp) / "home"))
        build = ["build", "--local", "--json", "--variant", args.variant, "--repo", REPO, str(project)]
        rows = []
        seconds, result = _run(build, env)
        rows.append(("first build (nothing on the Hub)", seconds, _states(result)))
        _run(["push", REPO, str(project), "--allow-untested", "--no-card"], env)
        for label, extra in (("fresh build folder, hub cache", []), ("fresh build folder, --no-hub-cache",
                                                                     ["--no-hub-cache"])):
            out = Path(tmp) / f"out-{len(rows)}"
            seconds, result = _run([*build[:-1], "--out", str(out), *extra, str(project)], env)
            rows.append((label, seconds, _states(result)))
        server.close()
    print(f"{Path(args.project).name}, `publisher build --local`, server on 127.0.0.1")
    print(f"{'step':<36} {'seconds':>8}  states")
    for label, seconds, states in rows:
        print(f"{label:<36} {seconds:>8.1f}  {states}")


if __name__ == "__main__":
    main()
