"""Wall time of the workflow rehearsals under the real `act` engine
(tests/test_act_rehearsal.py): each test run alone through pytest, one after
the other, with the machine's load average before and after. Prints a table.

- publish:  release.yml: plan -> build torch-cpu (Docker) -> test -> push to the local Hub -> kernels loads it
- refuse:   release.yml: plan -> two build jobs that fail with their reasons; nothing uploaded or pushed
- ci:       ci.yml's job in the debootstrap image: apt tools, checkout, .ci/run (installs
            everything on the bare Debian, then pytest tests/test_workflows.py)

The Docker builder image and the toolchain caches are whatever the machine has
(the first run on a fresh machine also builds the builder image: minutes).

    python benchmarks/act_rehearsal.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "publish": "test_release_workflow_publishes_a_release_kernels_loads",
    "refuse": "test_release_workflow_fails_each_unobtainable_variant_with_its_reason_and_publishes_nothing",
    "ci": "test_ci_workflow_runs_ci_run_in_our_debian_image",
}


def run(test: str) -> tuple[float, bool]:
    with tempfile.TemporaryDirectory(prefix="act-bench-") as tmp:
        t0 = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", tmp,
             f"tests/test_act_rehearsal.py::{test}"],
            cwd=REPO, capture_output=True, text=True)
        return time.monotonic() - t0, result.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--case", choices=sorted(CASES), action="append", help="only these cases (repeatable)")
    args = parser.parse_args()
    print("| case | run | wall s | passed | load avg before -> after |")
    print("| --- | ---: | ---: | --- | --- |")
    for name, test in CASES.items():
        if args.case and name not in args.case:
            continue
        for i in range(1, args.runs + 1):
            before = os.getloadavg()[0]
            seconds, ok = run(test)
            print(f"| {name} | {i} | {seconds:.1f} | {'yes' if ok else 'NO'} | {before:.1f} -> {os.getloadavg()[0]:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
