"""Shared pytest fixtures. Each area keeps its fixtures in its own module,
loaded here as a plugin; tests run the CLI through tests/cli_helper.py."""

import json
import os
import resource
from collections import defaultdict

import pytest

pytest_plugins = ["hub_fixtures", "push_fixtures", "matrix_fixtures", "smoke_fixtures", "bench_fixtures",
                  "metadata_fixtures"]

_FILE_SECONDS: dict[str, float] = defaultdict(float)  # test file -> setup + call + teardown, every test of it
_FILE_CPU: dict[str, float] = defaultdict(float)  # test file -> CPU seconds of its process and the children it waited for
_TEST_SECONDS: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # test -> [wall s, CPU s]
_CPU_MARK: list[float] = []  # this process's CPU (with its children's) when its last phase ended


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_collection_modifyitems(config, items):
    """Files that hold slow tests first, each file's tests together and in their own order: the
    parallel run (xdist, a file per process at a time) then starts the long files while the short
    ones fill in behind them, instead of ending on one."""
    has_slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in has_slow)  # stable: keeps the order within each group


def pytest_runtest_logstart(nodeid, location):
    _CPU_MARK[:] = [_cpu_seconds()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The CPU each phase used, in the process that ran it (a worker's reports reach the main process
    with it); not counted: Docker's and nix's daemons, and what a test's containers run."""
    outcome = yield
    now = _cpu_seconds()
    outcome.get_result().user_properties.append(("cpu_s", now - (_CPU_MARK[0] if _CPU_MARK else now)))
    _CPU_MARK[:] = [now]


def pytest_runtest_logreport(report):
    """Each phase's time, by test file (in a parallel run, the main process hears every worker's reports)."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] += report.duration
    cpu = sum(v for k, v in report.user_properties if k == "cpu_s")
    _FILE_CPU[path] += cpu
    _TEST_SECONDS[report.nodeid][0] += report.duration
    _TEST_SECONDS[report.nodeid][1] += cpu


def pytest_terminal_summary(terminalreporter):
    """The ten slowest test files (a file runs in one process: the longest bound how short a parallel run can
    be); with PUBLISHER_TEST_DURATIONS_OUT set, every file's seconds written there as JSON."""
    if not _FILE_SECONDS:
        return
    ranked = sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])
    terminalreporter.write_sep("=", "slowest 10 test files (wall s, CPU s of the tests and their children)")
    for path, seconds in ranked[:10]:
        terminalreporter.write_line(f"{seconds:8.1f}s {_FILE_CPU[path]:8.1f}s  {path}")
    out = os.environ.get("PUBLISHER_TEST_DURATIONS_OUT")
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            tests = sorted(_TEST_SECONDS.items(), key=lambda kv: -kv[1][0])
            json.dump({"files": {path: {"wall_s": round(seconds, 1), "cpu_s": round(_FILE_CPU[path], 1)}
                                 for path, seconds in ranked},
                       "tests": {nodeid: {"wall_s": round(w, 1), "cpu_s": round(c, 1)} for nodeid, (w, c) in tests}},
                      fh, indent=1)
