"""Wall time of the quick test loop (`pytest -m "not slow"`), with the machine's
load beside it: on a shared machine the load says how far to trust the number.

    python benchmarks/quick_loop.py [--runs N] [-- extra pytest args]

Prints one table row per run: wall seconds, CPU seconds (pytest and the
processes it waited for: what the run costs a machine it has to itself), tests
passed / failed / deselected, and the 1-minute load average before and after."""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(extra: list[str]) -> tuple[float, float, dict[str, int], float, float]:
    load_before = os.getloadavg()[0]
    cpu_before = _children_cpu()
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider", *extra],
                          cwd=HERE, capture_output=True, text=True)
    seconds = time.monotonic() - start
    cpu = _children_cpu() - cpu_before  # pytest and every process it waited for
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|deselected|skipped|error)", summary)}
    return seconds, cpu, counts, load_before, os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("extra", nargs="*", help="more pytest arguments (after --)")
    opts = parser.parse_args()
    print(f"cores: {os.cpu_count()}")
    print("| run | wall s | CPU s | passed | failed | skipped | deselected | load before | load after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run in range(1, opts.runs + 1):
        seconds, cpu, c, before, after = one_run(opts.extra)
        print(f"| {run} | {seconds:.1f} | {cpu:.1f} | {c.get('passed', 0)} | {c.get('failed', 0) + c.get('error', 0)} | "
              f"{c.get('skipped', 0)} | {c.get('deselected', 0)} | {before:.1f} | {after:.1f} |")


if __name__ == "__main__":
    main()
