"""Shared pytest fixtures. Each area keeps its fixtures in its own module,
loaded here as a plugin; tests run the CLI through tests/cli_helper.py."""

import json
import os
from collections import defaultdict

pytest_plugins = ["hub_fixtures", "push_fixtures", "matrix_fixtures", "smoke_fixtures", "bench_fixtures",
                  "metadata_fixtures"]

_FILE_SECONDS: dict[str, float] = defaultdict(float)  # test file -> setup + call + teardown, every test of it


def pytest_collection_modifyitems(config, items):
    """Files that hold slow tests first, each file's tests together and in their own order: the
    parallel run (xdist, a file per process at a time) then starts the long files while the short
    ones fill in behind them, instead of ending on one."""
    has_slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in has_slow)  # stable: keeps the order within each group


def pytest_runtest_logreport(report):
    """Each phase's time, by test file (in a parallel run, the main process hears every worker's reports)."""
    _FILE_SECONDS[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter):
    """The ten slowest test files (a file runs in one process: the longest bound how short a parallel run can
    be); with PUBLISHER_TEST_DURATIONS_OUT set, every file's seconds written there as JSON."""
    if not _FILE_SECONDS:
        return
    ranked = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])
    terminalreporter.write_sep("=", "slowest 10 test files")
    for path, seconds in ranked[:10]:
        terminalreporter.write_line(f"{seconds:8.1f}s  {path}")
    out = os.environ.get("PUBLISHER_TEST_DURATIONS_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump({path: round(seconds, 1) for path, seconds in ranked}, fh, indent=1)
