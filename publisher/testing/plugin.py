"""pytest plugin installed as the conftest.py of the temporary test folder.

Standalone (stdlib + pytest + torch). It registers the `kernels_ci` marker
(so projects using --strict-markers style configs still collect), records
the device the tests run on ($PUBLISHER_TEST_DEVICE_OUT), offers a
`device` fixture like upstream's CI harness (a project's own fixture wins),
and appends one JSON line per test event to $PUBLISHER_TEST_EVENTS — written
and flushed as it happens, so the file survives a segfault or a kill and
names the test that was running. For a CPU variant it makes `cpu` the
backend `kernels` selects, as on a CPU torch (see _load_as_cpu_torch)."""

from __future__ import annotations

import json
import os

import pytest

_EVENTS = os.environ.get("PUBLISHER_TEST_EVENTS")
_DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "metal": "mps"}


def _emit(**event) -> None:
    if not _EVENTS:
        return
    with open(_EVENTS, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(event) + "\n")
        fh.flush()


def _load_as_cpu_torch() -> None:
    """`kernels` picks the backend from how torch was built (a CUDA torch: cuda,
    GPU or not) and has no setting for it, so a project's `get_kernel(repo)`
    would pass over the CPU variant under test, which this torch can run
    (`get_kernel(repo, backend="cpu")` loads it). Make `cpu` its default, as a
    CPU torch user gets; kernels is pinned (publisher.testing.environment)."""
    import kernels.backends
    import kernels.python_deps
    import kernels.validate

    for module in (kernels.backends, kernels.python_deps, kernels.validate):
        if not hasattr(module, "_backend"):
            raise pytest.UsageError(f"publisher cannot select the cpu backend of this kernels release ({module.__name__})")
        module._backend = kernels.backends.CPU


def pytest_configure(config):
    config.addinivalue_line("markers", "kernels_ci: CI subset of a kernel project's tests")
    if os.environ.get("PUBLISHER_TEST_BACKEND") == "cpu":
        _load_as_cpu_torch()
    out = os.environ.get("PUBLISHER_TEST_DEVICE_OUT")
    if out:
        import publisher_device  # device.py, copied beside this file

        with open(out, "w", encoding="utf-8") as fh:
            json.dump(publisher_device.collect(), fh)


@pytest.fixture(scope="session")
def device():
    """The device of the variant under test: its accelerator when usable, else the CPU."""
    import torch

    name = _DEVICES.get(os.environ.get("PUBLISHER_TEST_BACKEND", "cpu"))
    usable = {
        "cuda": torch.cuda.is_available(),
        "xpu": hasattr(torch, "xpu") and torch.xpu.is_available(),
        "mps": torch.backends.mps.is_available(),
    }
    return torch.device(name if name and usable.get(name) else "cpu")


def pytest_collectreport(report):
    if report.failed:
        _emit(event="collect-error", nodeid=report.nodeid)


def pytest_runtest_logstart(nodeid, location):
    _emit(event="start", nodeid=nodeid)


def pytest_runtest_logreport(report):
    # A skip's longrepr is (file, line, "Skipped: reason").
    skip = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else None
    _emit(
        event="report",
        nodeid=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        xfail=hasattr(report, "wasxfail"),
        **({"reason": str(skip)} if skip else {}),
    )


def pytest_runtest_logfinish(nodeid, location):
    _emit(event="finish", nodeid=nodeid)
