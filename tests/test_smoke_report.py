"""Counting test outcomes from the plugin's event log, and the output tail."""

from __future__ import annotations

import json

from publisher.testing.report import TestCounts, VariantTestResult, read_events, tail


def write_events(path, events):
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def run_of(node, *phases, finish=True):
    events = [{"event": "start", "nodeid": node}]
    events += [{"event": "report", "nodeid": node, "when": w, "outcome": o} for w, o in phases]
    return events + ([{"event": "finish", "nodeid": node}] if finish else [])


def test_outcomes_are_counted_once_per_test(tmp_path):
    events = (
        run_of("t::ok", ("setup", "passed"), ("call", "passed"), ("teardown", "passed"))
        + run_of("t::bad", ("setup", "passed"), ("call", "failed"), ("teardown", "passed"))
        + run_of("t::skip", ("setup", "skipped"), ("teardown", "passed"))
        + run_of("t::fixture", ("setup", "failed"), ("teardown", "passed"))
        + run_of("t::teardown", ("setup", "passed"), ("call", "passed"), ("teardown", "failed"))
        + [{"event": "collect-error", "nodeid": "tests/test_x.py"}]
    )
    summary = read_events(write_events(tmp_path / "e.jsonl", events))
    assert summary.counts == TestCounts(passed=1, failed=1, skipped=1, errors=3)
    assert summary.unfinished is None
    assert set(summary.failing) == {"tests/test_x.py", "t::bad", "t::fixture", "t::teardown"}


def test_a_test_that_never_finished_is_failed_and_named(tmp_path):
    events = run_of("t::ok", ("setup", "passed"), ("call", "passed"), ("teardown", "passed"))
    events += run_of("t::crash", ("setup", "passed"), finish=False)
    path = write_events(tmp_path / "e.jsonl", events)
    with path.open("a") as fh:
        fh.write('{"event": "rep')  # the line the crash cut short
    summary = read_events(path)
    assert summary.counts == TestCounts(passed=1, failed=1)
    assert summary.unfinished == "t::crash"


def test_missing_event_log_counts_nothing(tmp_path):
    summary = read_events(tmp_path / "absent.jsonl")
    assert summary.counts == TestCounts() and summary.unfinished is None


def test_tail_keeps_the_test_frames_and_drops_pytest_internals():
    dump = "\n".join([
        "Fatal Python error: Segmentation fault",
        '  File "/site-packages/torch/_ops.py", line 1279 in __call__',
        '  File "/tmp/x/tests/test_k.py", line 14, in test_k',
        "    out = kernel.op(x)",
        '  File "/site-packages/_pytest/python.py", line 187, in pytest_pyfunc_call',
        "    result = testfunction(**testargs)",
        '  File "/site-packages/pluggy/_callers.py", line 103, in _multicall',
        "    res = hook_impl.function(*args)",
        '  File "<frozen runpy>", line 88 in _run_code',
    ])
    kept = tail(dump)
    assert "test_k.py" in kept and "out = kernel.op(x)" in kept and "torch/_ops.py" in kept
    assert "_pytest" not in kept and "pluggy" not in kept and "testfunction" not in kept and "runpy" not in kept


def test_tail_is_bounded_and_redacted(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "a" * 34)
    text = "\n".join(f"line {i}" for i in range(1000)) + "\ntoken hf_" + "a" * 34
    kept = tail(text)
    assert "line 999" in kept and "line 0\n" not in kept
    assert "hf_" + "a" * 34 not in kept


def test_report_entry_has_the_fields_the_push_stage_reads():
    result = VariantTestResult(
        variant="torch212-cxx11-cpu-x86_64-linux", status="passed", fingerprint="f" * 64, on_hardware=True,
        device={"gpu": None, "torch": "2.12.0", "python": "3.11.7", "platform": "x86_64-linux", "extra": 1},
        tests=TestCounts(passed=3), seconds=1.234, output_tail="3 passed", time="2026-01-01T00:00:00+00:00",
    )
    entry = result.entry()
    assert {"status", "fingerprint", "on_hardware", "device", "tests", "seconds", "output_tail", "time"} <= set(entry)
    assert set(entry["device"]) == {"gpu", "driver", "torch", "cuda", "platform", "python", "capability", "hidden"}
    assert entry["tests"] == {"passed": 3, "failed": 0, "skipped": 0, "errors": 0}
    assert entry["seconds"] == 1.23
