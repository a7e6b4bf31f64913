"""Push time vs huggingface_hub's `upload_folder` of the same build folder to
the same Hub-compatible server (127.0.0.1), and the bytes each sends on an
unchanged re-push (request bodies counted at the server). Three pushes per
repo: the first (a new repo, branch v1), an unchanged re-push of v1, and the
next release (branch v2 of the same repo, as each release after the first is,
from a copy of PROJECT whose binary files hold new bytes).

    .venv/bin/python benchmarks/push_vs_upload_folder.py [PROJECT]

PROJECT must hold a built build/ (default: kernel_projects/rmsnorm). Both
tools run in a fresh process, as a user would run them, interleaved; numbers
are the median of --repeat runs. --baseline SRC adds a row for the publisher
found in SRC (e.g. `git archive main publisher | tar -x -C SRC`), measured in
the same run, for before/after figures.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from push_common import compile_publisher, next_release, push_argv, start_server, tool_env, upload_argv


def _timed(argv: list[str], env: dict, cwd: str) -> float:
    start = time.perf_counter()
    # a neutral cwd: `python -m` puts it first on sys.path, ahead of PYTHONPATH (--baseline)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cwd)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed:\n{result.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("project", nargs="?", default="kernel_projects/rmsnorm")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0],
                        help="added by the server to every answer (a Hub across a network); one table each")
    parser.add_argument("--baseline", type=Path, help="a folder holding another publisher/ package to compare")
    args = parser.parse_args()
    project = Path(args.project).resolve()
    if args.baseline and not (args.baseline / "publisher" / "resources" / "matrix.yaml").is_file():
        raise SystemExit(f"{args.baseline}: no publisher/resources/matrix.yaml (give a folder holding a whole "
                         "publisher/ package, e.g. `git archive main publisher | tar -x -C SRC`)")
    compile_publisher()
    if args.baseline:
        compile_publisher(args.baseline)
    build = project / "build"
    files = [p for p in build.rglob("*") if p.is_file() and ".publisher" not in p.parts and "__pycache__" not in p.parts]
    size = sum(p.stat().st_size for p in files)
    print(f"{project.name}: {len(files)} files, {size / 1024:.1f} KiB in build/; server on 127.0.0.1; "
          f"median of {args.repeat}")
    for latency in args.latency_ms:
        table(project, latency, args.repeat, args.baseline)


def table(project: Path, latency: float, repeat: int, baseline: Path | None) -> None:
    with tempfile.TemporaryDirectory() as data:
        server = start_server(Path(data), latency)
        following = next_release(project, Path(data) / "next")
        env = tool_env(server, Path(data))
        tools = ["publisher push", "upload_folder"] + (["baseline push"] if baseline else [])
        rows: dict[str, tuple[list, ...]] = {tool: ([], [], [], [], [], [], []) for tool in tools}
        for _ in range(repeat):
            for tool in rows:
                repo = f"bench{uuid.uuid4().hex[:6]}/{project.name}"
                argv = upload_argv(repo, project) if tool == "upload_folder" else push_argv(repo, project)
                env_of_tool = {**env, "PYTHONPATH": str(baseline.resolve())} if tool == "baseline push" else env
                server.state.reset_stats()
                first = _timed(argv, env_of_tool, data)
                first_calls = sum(server.state.stats()["requests"].values())
                server.state.reset_stats()
                again = _timed(argv, env_of_tool, data)
                rows[tool][0].append(first)
                rows[tool][1].append(again)
                rows[tool][2].append(server.state.stats()["bytes_in_total"])
                rows[tool][3].append(first_calls)
                rows[tool][4].append(sum(server.state.stats()["requests"].values()))
                server.state.reset_stats()
                argv = upload_argv(repo, following, "v2") if tool == "upload_folder" else push_argv(repo, following, "v2")
                rows[tool][5].append(_timed(argv, env_of_tool, data))
                rows[tool][6].append(sum(server.state.stats()["requests"].values()))
        server.close()

    print(f"\nlatency added per request: {latency:g} ms")
    base_first, base_again, base_next = (statistics.median(rows["upload_folder"][i]) for i in (0, 1, 5))
    print(f"{'tool':<16} {'first push (s)':>15} {'ratio':>6} {'requests':>8} {'unchanged re-push (s)':>22} "
          f"{'ratio':>6} {'requests':>8} {'re-push bytes sent':>19} {'next release (s)':>16} {'ratio':>6} "
          f"{'requests':>8}")
    for tool, (first, again, sent, first_calls, again_calls, following, following_calls) in rows.items():
        f, a, n = statistics.median(first), statistics.median(again), statistics.median(following)
        print(f"{tool:<16} {f:>15.2f} {f / base_first:>6.2f} {int(statistics.median(first_calls)):>8} "
              f"{a:>22.2f} {a / base_again:>6.2f} {int(statistics.median(again_calls)):>8} "
              f"{int(statistics.median(sent)):>19} {n:>16.2f} {n / base_next:>6.2f} "
              f"{int(statistics.median(following_calls)):>8}")


if __name__ == "__main__":
    main()
