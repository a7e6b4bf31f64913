"""Benchmark: `check` (config only) of every build.toml in the shared corpus,
in one process. Goal: the whole corpus in <= 1 s. Prints a table."""

from __future__ import annotations

import sys
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "build-toml"


def main() -> int:
    if not CORPUS.is_dir():
        print(f"corpus not found at {CORPUS}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    from publisher.project.load import load_project  # import time counts: a user pays it too

    imported = time.perf_counter()
    files = sorted(CORPUS.glob("*.toml"))
    findings = errors = 0
    for path in files:
        _, found = load_project(path)
        findings += len(found)
        errors += any(f.is_error for f in found)
    done = time.perf_counter()
    print(f"{'files':>6} {'with errors':>12} {'findings':>9} {'import s':>9} {'check s':>8} {'total s':>8} {'ms/file':>8}")
    print(f"{len(files):>6} {errors:>12} {findings:>9} {imported - started:>9.3f} {done - imported:>8.3f} "
          f"{done - started:>8.3f} {1000 * (done - imported) / len(files):>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
