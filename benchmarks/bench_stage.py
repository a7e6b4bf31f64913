"""`publisher bench` itself: what it costs beyond the workloads it times, and
how far its numbers move between runs on this machine.

    python benchmarks/bench_stage.py [--runs N] [--iterations N] [--project DIR]

1. Overhead: a Python-only kernel (built here, in a second) with one workload
   of microseconds: wall time of `publisher bench` for one variant against the
   time its samples took (start of the variant's interpreter, torch and
   kernels imports, the kernel's load, calibration and warm-up are the rest).
2. Repeatability: `--runs` runs of `publisher bench` on PROJECT (default
   kernel_projects/rmsnorm, which must be built: `publisher build
   kernel_projects/rmsnorm --local --matrix matrices/cpu-2.13.yaml`): per
   workload, the kernel's and the reference's medians, lowest and highest
   across runs, and the speedup's range. The load average is printed beside:
   on a shared machine it says how far to trust them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TWICE = {
    "build.toml": '[general]\nname = "twice"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n\n'
                  "[torch-noarch]\n",
    "torch-ext/twice/__init__.py": "import torch\n\n__all__ = ['twice']\n\n\ndef twice(x):\n    return x * 2\n",
    "benchmarks/benchmark.py": "import torch\nfrom kernels.benchmark import Benchmark\n\n\nclass Twice(Benchmark):\n"
                               "    def setup(self):\n        self.x = torch.randn(64, 64, device=self.device)\n\n"
                               "    def benchmark_tiny(self):\n        self.out = self.kernel.twice(self.x)\n\n"
                               "    def verify_tiny(self):\n        return self.x * 2\n",
}


def publisher(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "publisher", *args], capture_output=True, text=True, cwd=ROOT)


def bench(project: Path, iterations: int) -> tuple[float, dict]:
    start = time.monotonic()
    done = publisher("bench", str(project), "--iterations", str(iterations), "--json")
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"publisher bench {project} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def overhead(iterations: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "twice"
        for rel, text in TWICE.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        if publisher("build", str(root), "--local").returncode != 0:
            sys.exit("could not build the Python-only kernel")
        print("| run | publisher bench wall s | variant s | samples s (kernel + reference) |")
        print("| --- | ---: | ---: | ---: |")
        for run in range(1, 4):
            wall, report = bench(root, iterations)
            (entry,) = report["variants"].values()
            (w,) = entry["workloads"]
            timed = sum(w[c]["samples"] * w[c]["calls_per_sample"] * w[c]["mean_ms"] / 1000 for c in ("kernel", "reference"))
            print(f"| {run} | {wall:.2f} | {entry['seconds']:.2f} | {timed:.3f} |")


def repeatability(project: Path, runs: int, iterations: int) -> None:
    medians: dict[str, dict[str, list[float]]] = {}
    device = ""
    for _ in range(runs):
        load = os.getloadavg()[0]
        wall, report = bench(project, iterations)
        for name, entry in report["variants"].items():
            device = f"{entry['device'].get('name')} ({entry['device'].get('torch')})"
            for w in entry["workloads"]:
                key = f"{name} {w['benchmark']}.{w['workload']}"
                row = medians.setdefault(key, {"kernel": [], "reference": [], "speedup": []})
                row["kernel"].append(w["kernel"]["median_ms"])
                if w.get("reference"):
                    row["reference"].append(w["reference"]["median_ms"])
                    row["speedup"].append(w["speedup"])
        print(f"run: {wall:.1f} s, load before {load:.2f}", file=sys.stderr)
    print(f"\n{project.name} on {device}, {runs} runs of --iterations {iterations}: median ms, lowest-highest across runs")
    print("\n| workload | kernel ms | reference ms | speedup |")
    print("| --- | ---: | ---: | ---: |")
    for key, row in medians.items():
        cells = [f"{min(v):.4g}-{max(v):.4g}" if v else "-" for v in (row["kernel"], row["reference"])]
        speed = f"{min(row['speedup']):.2f}-{max(row['speedup']):.2f}x" if row["speedup"] else "-"
        print(f"| {key} | {cells[0]} | {cells[1]} | {speed} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--project", type=Path, default=ROOT / "kernel_projects" / "rmsnorm")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores\n")
    overhead(args.iterations)
    repeatability(args.project, args.runs, args.iterations)
    return 0


if __name__ == "__main__":
    sys.exit(main())
