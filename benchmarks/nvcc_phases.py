"""Where one variant's CUDA compile time goes, phase by phase, and what that
allows on N cores.

    python benchmarks/nvcc_phases.py WORK_DIR [--cores 2 4 8]

WORK_DIR is a variant's work folder after a build
(PROJECT/build/.publisher/work/<variant>, holding build.ninja). Each CUDA
compile of its build.ninja is run again, alone, with one nvcc thread and
`nvcc --time` (nvcc's own per-phase timer), into a scratch object. The phases
nvcc runs once per file, one after the other (host preprocessing, cudafe++,
fatbinary, the host compile), are the serial part S; the ones it runs once
per architecture (device preprocessing, cicc, ptxas) are the part P that
`--threads` spreads. On n cores one file takes at least S + P / min(n, archs),
and no schedule beats (S + P) / n.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shlex
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

PER_ARCH = ("g++ (preprocessing 1)", "cicc", "ptxas")


def nvcc_edges(ninja: str) -> list[tuple[str, str, str]]:
    """(nvcc binary, source, flags) of every nvcc edge in build.ninja."""
    text = ninja.replace("$\n", "")
    rule = re.search(r"rule nvcc\n\s+command = (\S+)", text)
    if rule is None:
        return []
    edges = re.findall(r"build\s+\S+:\s+nvcc\s+(\S+)\n\s+flags = (.*)", text)
    unescape = lambda text: re.sub(r"\$([$ :])", r"\1", text)  # noqa: E731  (ninja's $$, "$ ", "$:")
    return [(rule.group(1), unescape(source), unescape(" ".join(flags.split()))) for source, flags in edges]


def phases(nvcc: str, source: str, flags: str, scratch: Path) -> tuple[dict[str, float], int, float]:
    table = scratch / "time.csv"
    table.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "NVCC_APPEND_FLAGS"}
    argv = [nvcc, *shlex.split(flags), "--threads", "1", "--time", str(table), "-c", source,
            "-o", str(scratch / "out.o")]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{source}: nvcc failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    spent: dict[str, float] = defaultdict(float)
    archs = set()
    with table.open() as fh:
        for row in list(csv.reader(fh))[1:]:
            name, arch, ms = row[1].strip(), row[4].strip(), float(row[-2])
            if name.startswith("nvcc"):
                continue
            spent[name] += ms / 1000
            if name in PER_ARCH and arch:
                archs.add(arch.replace("sm_", "compute_"))
    return spent, len(archs), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work_dir", type=Path)
    ap.add_argument("--cores", type=int, nargs="+", default=[2, 4, 8])
    opts = ap.parse_args()
    edges = nvcc_edges((opts.work_dir / "build.ninja").read_text())
    if not edges:
        raise SystemExit(f"{opts.work_dir}/build.ninja: no nvcc edge")
    with tempfile.TemporaryDirectory() as scratch:
        for nvcc, source, flags in edges:
            spent, archs, wall = phases(nvcc, source, flags, Path(scratch))
            serial = sum(s for name, s in spent.items() if name not in PER_ARCH)
            parallel = sum(s for name, s in spent.items() if name in PER_ARCH)
            print(f"{Path(source).name}: {archs} architectures, one thread: {wall:.1f} s wall")
            for name, s in sorted(spent.items(), key=lambda kv: -kv[1]):
                print(f"  {name:<24} {s:8.1f} s  {'per architecture' if name in PER_ARCH else 'once (serial)'}")
            print(f"  serial S {serial:.1f} s, per-architecture P {parallel:.1f} s "
                  f"({100 * serial / (serial + parallel):.0f} % serial)")
            for n in opts.cores:
                bound = serial + parallel / min(n, archs)
                print(f"  {n} cores: S + P/{min(n, archs)} = {bound:.1f} s "
                      f"({bound / (serial + parallel):.2f} of one thread); any schedule >= "
                      f"{(serial + parallel) / n:.1f} s ({1 / n:.2f})")


if __name__ == "__main__":
    main()
