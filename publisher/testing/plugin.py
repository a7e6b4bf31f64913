"""pytest plugin installed as the conftest.py of the temporary test folder.

Standalone (stdlib + pytest + torch). It registers the `kernels_ci` marker
(so projects using --strict-markers style configs still collect), records
the device the tests run on ($PUBLISHER_TEST_DEVICE_OUT), offers a
`device` fixture like upstream's CI harness (a project's own fixture wins),
and appends one JSON line per test event to $PUBLISHER_TEST_EVENTS — written
and flushed as it happens, so the file survives a segfault or a kill and
names the test that was running; for a test that fails or cannot be
collected, it also records what was raised and where (so publisher can tell
a missing test dependency from a failing kernel). For a CPU variant it makes
`cpu` the backend `kernels` selects, as on a CPU torch (see
_load_as_cpu_torch), and keeps the hidden accelerators hidden from torch
($PUBLISHER_TEST_HIDDEN_ACCELERATORS, see _hide)."""

from __future__ import annotations

import json
import os
import traceback

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


def _hidden() -> dict:
    try:
        return json.loads(os.environ.get("PUBLISHER_TEST_HIDDEN_ACCELERATORS") or "{}")
    except ValueError:
        return {}


def _hide(checks: list[str]) -> None:
    """The variables publisher set hide the devices from their runtimes; a
    runtime without one (MPS), or one that ignored it, is hidden from torch here."""
    import torch

    modules = {"cuda": getattr(torch, "cuda", None), "xpu": getattr(torch, "xpu", None),
               "mps": getattr(getattr(torch, "backends", None), "mps", None)}
    for check in checks:
        module = modules.get(check)
        if module is not None and getattr(module, "is_available", None) and module.is_available():
            module.is_available = lambda: False


_RERUNS: list[str] = []  # plugins that honour @pytest.mark.flaky here (flaky, pytest-rerunfailures)


def pytest_configure(config):
    config.addinivalue_line("markers", "kernels_ci: CI subset of a kernel project's tests")
    _RERUNS[:] = [name for name in ("flaky", "rerunfailures") if config.pluginmanager.hasplugin(name)]
    if os.environ.get("PUBLISHER_TEST_BACKEND") == "cpu":
        _load_as_cpu_torch()
    hidden = _hidden()
    if hidden:
        _hide(list(hidden.get("torch") or []))
    out = os.environ.get("PUBLISHER_TEST_DEVICE_OUT")
    if out:
        import publisher_device  # device.py, copied beside this file

        device = publisher_device.collect()
        device["hidden"] = list(hidden.get("accelerators") or [])
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(device, fh)


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


def pytest_exception_interact(node, call, report):
    """What a failing test or collector raised, and the innermost frame it came from."""
    excinfo = call.excinfo
    if excinfo is None:
        return
    error = excinfo.value
    while error.__cause__ is not None and type(error).__name__ == "CollectError":
        error = error.__cause__  # pytest wraps what importing a test module raised
    frames = traceback.extract_tb(error.__traceback__)
    where = frames[-1] if frames else None
    if isinstance(error, SyntaxError) and error.filename:
        file, line = error.filename, error.lineno
    else:
        file, line = (where.filename, where.lineno) if where else (None, None)
    _emit(
        event="exception",
        nodeid=report.nodeid,
        type=type(error).__name__,
        module=getattr(error, "name", None) if isinstance(error, ImportError) else None,
        message=_message(error),
        file=file,
        line=line,
        files=[f.filename for f in frames][-30:],
    )


def _message(error: BaseException) -> str:
    if type(error).__name__ == "FixtureLookupError":  # its str() is a tuple; its message is the sentence
        return f"fixture '{getattr(error, 'argname', '?')}' not found"
    text = str(error)
    return text.splitlines()[0][:300] if text else ""


def pytest_collectreport(report):
    if report.failed:
        _emit(event="collect-error", nodeid=report.nodeid)


def pytest_runtest_logstart(nodeid, location):
    _emit(event="start", nodeid=nodeid)


def pytest_runtest_logreport(report):
    # A skip's longrepr is (file, line, "Skipped: reason").
    skip = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else None
    # a failing test its author marked flaky, with no plugin here to run it again
    unretried = report.failed and "flaky" in report.keywords and not _RERUNS
    # what the test recorded with pytest's record_property (adopt's generated tests: what they checked)
    properties = {str(k): str(v) for k, v in getattr(report, "user_properties", ()) or ()} if report.when == "call" else {}
    _emit(
        event="report",
        nodeid=report.nodeid,
        when=report.when,
        outcome=report.outcome,
        xfail=hasattr(report, "wasxfail"),
        **({"reason": str(skip)} if skip else {}),
        **({"flaky_unretried": True} if unretried else {}),
        **({"properties": properties} if properties else {}),
    )


def pytest_runtest_logfinish(nodeid, location):
    _emit(event="finish", nodeid=nodeid)
