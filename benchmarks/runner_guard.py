"""Cost of running every child under guard.py (publisher/runner.py).

Prints a table: mean wall time of `runner.run(["true"])` and of a 50 ms
command, with the guard (as publisher runs them) and without it (the command
started directly, as before the guard). One build starts a handful of
commands (toolchain probes, ninja, the ABI check), so the per-command
difference is what a build pays.

    python benchmarks/runner_guard.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

from publisher import runner


def timed(argv: list[str], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        assert runner.run(argv).ok
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    repeat = parser.parse_args().repeat
    rows = []
    for label, argv in (("true", ["true"]), ("sleep 0.05", ["sleep", "0.05"])):
        guarded = timed(argv, repeat)
        with mock.patch.object(runner, "_guarded", lambda argv, env: list(argv)):
            direct = timed(argv, repeat)
        rows.append((label, direct, guarded))
    print("| command | direct (ms) | under guard.py (ms) | added (ms) |\n| --- | ---: | ---: | ---: |")
    for label, direct, guarded in rows:
        print(f"| `{label}` | {direct:.1f} | {guarded:.1f} | {guarded - direct:.1f} |")
    print(f"\nmedian of {repeat} runs each")


if __name__ == "__main__":
    main()
