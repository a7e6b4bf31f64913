"""Where `publisher push` spends what `upload_folder` does not, on a small
build: the CPU its imports cost beyond huggingface_hub's, and the requests of
each tool per Hub endpoint (first push to a new repo, unchanged re-push),
against the Hub-compatible server on 127.0.0.1.

    .venv/bin/python benchmarks/push_fixed_costs.py PROJECT [--repeat 7]

PROJECT must hold a built build/. CPU is user+sys of a fresh process (median
of --repeat), which a loaded machine disturbs far less than wall time.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from push_common import compile_publisher, push_argv, start_server, tool_env, upload_argv

HUB_IMPORTS = "import huggingface_hub.hf_api, huggingface_hub._commit_api"


def _cpu(argv: list[str], repeat: int, env: dict | None = None, cwd: str | None = None) -> float:
    spent = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, check=True, capture_output=True, env=env, cwd=cwd)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        spent.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("project", type=Path)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    project = args.project.resolve()
    compile_publisher()
    py = sys.executable

    startup = _cpu([py, "-c", "pass"], args.repeat)
    hub = _cpu([py, "-c", HUB_IMPORTS], args.repeat)
    publisher = _cpu([py, "-c", HUB_IMPORTS + "; import publisher.cli.push"], args.repeat)
    print(f"import CPU, median of {args.repeat}: python {startup:.3f} s; huggingface_hub +{hub - startup:.3f} s; "
          f"publisher push's own modules (click, yaml, project, plan, push) +{publisher - hub:.3f} s")

    with tempfile.TemporaryDirectory() as data:
        server = start_server(Path(data))
        env = tool_env(server, Path(data))
        print(f"{'tool':<16} {'run':<10} {'CPU s':>6} {'requests':>8}  per endpoint")
        for tool in ("publisher push", "upload_folder"):
            repo = f"bench{uuid.uuid4().hex[:6]}/{project.name}"
            argv = upload_argv(repo, project) if tool == "upload_folder" else push_argv(repo, project)
            for run in ("first", "re-push"):
                server.state.reset_stats()
                cpu = _cpu(argv, 1, env, data)
                calls = server.state.stats()["requests"]
                # "unknown": a request for a repo that does not exist (answered 404 before routing)
                print(f"{tool:<16} {run:<10} {cpu:>6.2f} {sum(calls.values()):>8}  "
                      + ", ".join(f"{k} {v}" for k, v in sorted(calls.items())))
        server.close()


if __name__ == "__main__":
    main()
