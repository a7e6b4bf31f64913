"""One real kernel project built by two publisher trees (a baseline, e.g. a
worktree at git main, and this one), same variant, same core budget, and the
ratio of their wall times. Both builds start from a fresh git copy of the
project (nothing cached); the project itself is never modified.

Run them one after the other (default), or at the same time pinned to
disjoint CPU sets (--cpus A B), which gives both the same machine load.

    python benchmarks/kernel_build_speedup.py PROJECT --baseline TREE \\
        [--variant NAME | --local] [--cores N] [--matrix FILE] [--cpus 0-1 2-3]

PROJECT is e.g. a copy of kernels-community/relu outside this repository;
TREE is a folder holding the baseline's `publisher` package
(`git worktree add --detach /tmp/base main`).
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def fresh_copy(project: Path, dest: Path) -> Path:
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("build", ".git"))
    if not shutil.which("git"):  # publisher builds a project outside git too (no provenance commit)
        return dest
    git = ["git", "-C", str(dest), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        subprocess.run([*git, *argv], check=True)
    return dest


def knows(tree: Path, flag: str) -> bool:
    """Whether that tree's `publisher build` has `flag` (older trees lack the Hub cache)."""
    shown = subprocess.run([sys.executable, "-m", "publisher", "build", "--help"], cwd=tree, capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(tree)})
    return flag in shown.stdout


def start(tree: Path, project: Path, args: list[str], cpus: str | None) -> tuple[subprocess.Popen, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    # compile, never fetch: a tree with a Hub cache would otherwise ask the project's repo first
    args = [*args, "--no-hub-cache"] if knows(tree, "--no-hub-cache") else args
    argv = [sys.executable, "-m", "publisher", "build", str(project), *args, "--json"]
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    # cwd: `python -m` puts the working folder first on sys.path, before PYTHONPATH
    proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, time.perf_counter()


def finish(proc: subprocess.Popen, t0: float, label: str) -> tuple[float, str]:
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    try:
        states = ", ".join(f"{v['variant']}={v['state']}" for v in json.loads(out)["variants"])
    except (ValueError, KeyError) as bad:
        raise SystemExit(f"{label}: publisher build failed:\n{out[-2000:]}\n{err[-3000:]}") from bad
    return seconds, states


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("project", type=Path)
    ap.add_argument("--baseline", type=Path, required=True, help="folder holding the baseline's publisher package")
    ap.add_argument("--variant", help="variant to build (alone: from the matrix; with --local: of the running torch)")
    ap.add_argument("--local", action="store_true", help="build the running torch's variant")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="--cores for both builds")
    ap.add_argument("--matrix", type=Path)
    ap.add_argument("--cpus", nargs=2, metavar=("BASELINE", "THIS"), help="run both at once, pinned (taskset -c)")
    ap.add_argument("--keep", type=Path, help="build in this folder and keep it (logs, .ninja_log timings)")
    opts = ap.parse_args()
    # --local with --variant: that one of the running torch's variants (a CUDA torch also builds its cpu variant)
    args = (["--local"] if opts.local or not opts.variant else []) + (["--variant", opts.variant] if opts.variant else [])
    args += ["--cores", str(opts.cores), "--jobs", "1"]
    if opts.matrix:
        args += ["--matrix", str(opts.matrix.resolve())]

    work = opts.keep.resolve() if opts.keep else Path(tempfile.mkdtemp(prefix="publisher-kernel-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    trees = {"baseline": opts.baseline.resolve(), "this tree": HERE}
    copies = {label: fresh_copy(opts.project, work / label.replace(" ", "-")) for label in trees}
    rows: list[tuple[str, float, str]] = []
    loads = [load()]
    if opts.cpus:
        # each build's own end time: wait for both at once, not one after the other
        with ThreadPoolExecutor(2) as pool:
            done = [pool.submit(lambda label, cpus: finish(*start(trees[label], copies[label], args, cpus), label),
                                label, cpus) for label, cpus in zip(trees, opts.cpus, strict=True)]
            rows += [(label, *fut.result()) for label, fut in zip(trees, done, strict=True)]
    else:
        for label in trees:
            rows.append((label, *finish(*start(trees[label], copies[label], args, None), label)))
            loads.append(load())
    loads.append(load())

    print(f"project {opts.project.name}, publisher build {' '.join(args)}"
          + (f", pinned {opts.cpus[0]} / {opts.cpus[1]}, at the same time" if opts.cpus else ", one after the other"))
    print(f"load average (1, 5, 15 min) along the run: {' | '.join(loads)}")
    print(f"{'tree':<10}  {'seconds':>8}  result")
    for label, seconds, states in rows:
        print(f"{label:<10}  {seconds:8.1f}  {states}")
    print(f"this tree / baseline: {rows[1][1] / rows[0][1]:.2f} of the time ({rows[0][1] / rows[1][1]:.2f}x faster)")
    if not opts.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
