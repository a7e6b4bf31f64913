"""Build timings of `publisher build` on a tiny two-backend project.

Prints a table: cold build per variant (CPU with the local torch, CUDA 13.0
against PyPI torch 2.11, the GPU runner's cell), a no-op rebuild of those two, a
rebuild after one source file changed, and two variants built in parallel
versus one after the other. Toolchains are created (or reused from the user
cache) before timing starts; their creation time is reported separately.

    python benchmarks/build_times.py [--no-cuda] [--skip-matrix] [--keep DIR]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import yaml  # noqa: E402

from build_fixtures import write_tiny_project  # noqa: E402
from matrix_fixtures import GPU_RUNNER_MATRIX, local_variant_name, write_local_matrix  # noqa: E402

LOCAL = local_variant_name()
CUDA = "torch211-cxx11-cu130-x86_64-linux"  # the cell of GPU_RUNNER_MATRIX


def buildable_matrix(base: Path) -> Path:
    """The running torch's cell and the GPU runner's, in one matrix file."""
    local = yaml.safe_load(write_local_matrix(base / "local.yaml").read_text())
    local["torch"] += yaml.safe_load(GPU_RUNNER_MATRIX.read_text())["torch"]
    path = base / "buildable.yaml"
    path.write_text(yaml.safe_dump(local))
    return path


def publisher(*args: str, check: bool = True) -> tuple[float, dict]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "publisher", "build", *args, "--json"], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode != 0 and (check or not out.stdout.startswith("{")):
        raise SystemExit(f"publisher build {' '.join(args)} failed:\n{out.stdout}\n{out.stderr[-3000:]}")
    return seconds, json.loads(out.stdout)


def states(report: dict) -> str:
    return ", ".join(f"{v['variant'].split('-')[0]}-{v['variant'].split('-')[2]}={v['state']}" for v in report["variants"])


def _count(report: dict) -> str:
    counts: dict[str, int] = {}
    for v in report["variants"]:
        counts[v["state"]] = counts.get(v["state"], 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def _steps(report: dict) -> str:
    log = Path(report["variants"][0]["log"]).read_text()
    steps = [line.split("] ", 1)[1].split(" ")[0] for line in log.splitlines() if line.startswith("[")]
    return f"ninja ran {len(steps)} step(s)" + (f": {', '.join(steps)}" if steps else "")


def fresh(base: Path, name: str) -> Path:
    return write_tiny_project(base / name, git=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA variant")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--skip-matrix", action="store_true", help="leave out the whole-default-matrix rows (toolchain downloads)")
    opts = ap.parse_args()
    base = opts.keep or Path(tempfile.mkdtemp(prefix="publisher-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    rows: list[tuple[str, float, str]] = []
    both = ["--matrix", str(buildable_matrix(base))]
    variants = [*both, "--variant", LOCAL] + ([] if opts.no_cuda else ["--variant", CUDA])

    if not opts.no_cuda:  # toolchain first, so cold build times are compile times
        warm = fresh(base, "warm")
        t0 = time.perf_counter()
        from publisher.plan.matrix import load_matrix
        from publisher.plan.planner import make_plan
        from publisher.project.load import require_project
        from publisher.toolchains.provision import ensure_toolchain

        project = require_project(warm)
        ensure_toolchain(make_plan(project, load_matrix(GPU_RUNNER_MATRIX)).by_name()[CUDA].toolchain)
        rows.append(("CUDA toolchain ready (created or reused)", time.perf_counter() - t0, "torch 2.11 + CUDA 13.0"))

    single_variant_rows(base, rows, variants, opts.no_cuda, opts.skip_matrix)

    # Two variants of different toolchains, each with its own work dir. Both runs
    # have the same budget of 2 compile slots; in parallel the variants share it.
    serial = fresh(base, "serial")
    s_serial, _ = publisher(str(serial), *variants, "--jobs", "1", "--cores", "2")
    parallel = fresh(base, "parallel")
    s_par, _ = publisher(str(parallel), *variants, "--jobs", "2", "--cores", "1")
    rows.append(("2 variants, one after the other (jobs=1, cores=2)", s_serial, ""))
    rows.append(("2 variants in parallel (jobs=2, cores=1)", s_par, f"speedup {s_serial / s_par:.2f}x"))

    width = max(len(r[0]) for r in rows)
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'measurement':<{width}}  {'seconds':>8}  note")
    for name, seconds, note in rows:
        print(f"{name:<{width}}  {seconds:8.2f}  {note}")
    if not opts.keep:
        shutil.rmtree(base, ignore_errors=True)


def single_variant_rows(base: Path, rows: list, variants: list[str], no_cuda: bool, skip_matrix: bool) -> None:
    cold = fresh(base, "cold")
    s, r = publisher(str(cold), "--local", "--jobs", "1", "--cores", "2")
    rows.append((f"cold build {LOCAL} (--local)", s, states(r)))
    s, r = publisher(str(cold), "--local")
    rows.append(("no-op rebuild, --local", s, states(r)))

    # One source edited: a new ops id (a hash of the inputs), so that object and the binding recompile.
    src = cold / "scale_cpu" / "scale.cpp"
    src.write_text(src.read_text().replace("src[i] * factor", "factor * src[i]"))
    s, r = publisher(str(cold), "--local")
    rows.append(("one file changed, --local", s, _steps(r)))

    # A commit that changes no build input: the variant is repackaged (new provenance), nothing compiles.
    (cold / "README.md").write_text("# tiny\n")
    git = ["git", "-C", str(cold), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "docs"], check=True)
    s, r = publisher(str(cold), "--local")
    rows.append(("commit changing no build input, --local", s, _steps(r)))

    matrix = fresh(base, "matrix")
    if not no_cuda:
        s, r = publisher(str(matrix), "--matrix", str(GPU_RUNNER_MATRIX), "--variant", CUDA, "--jobs", "1", "--cores", "2")
        rows.append((f"cold build {CUDA}", s, states(r)))
    publisher(str(matrix), *variants)
    s, r = publisher(str(matrix), *variants)
    rows.append(("no-op rebuild, local + GPU runner cells", s, states(r)))
    if skip_matrix:
        return
    s, r = publisher(str(matrix), check=False)  # creates every obtainable toolchain, builds what it can
    rows.append(("first build, whole default matrix", s, _count(r)))
    s, r = publisher(str(matrix), check=False)
    rows.append(("no-op rebuild, whole default matrix", s, _count(r)))


if __name__ == "__main__":
    main()
