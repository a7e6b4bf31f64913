"""What adopt's generated tests tell the verdict (publisher/testing/verdict.py):
an op that refused its inputs ("needs inputs") leaves the variant untested with
the INPUTS line to edit, however many other tests passed; a pass that rests
only on generated tests says "ops run only" (or how many ops were compared with
a reference) in the report table and on the card. Quick: the event files are
written here as the plugin writes them."""

from __future__ import annotations

import json
from pathlib import Path

from publisher.options import TestOptions
from publisher.push.card import describe_test
from publisher.runner import RunResult
from publisher.testing import protocol, verdict
from publisher.testing.report import VariantTestResult, read_events, render_table

KERNEL = verdict.Kernel(frozenset({"index_ops"}), ("/build/torch215-cpu",))
ENV = verdict.Environment("/env/bin/python", "this interpreter", frozenset())
OK = RunResult(("pytest",), 0, "")
GENERATED = "tests/test_index_ops_ops.py::"


def _events(tmp_path: Path, tests: dict[str, tuple[str, str | None]]) -> Path:
    """tests: node -> (outcome, a recorded check or a skip reason)."""
    lines = []
    for node, (outcome, extra) in tests.items():
        lines.append({"event": "start", "nodeid": node})
        report = {"event": "report", "nodeid": node, "when": "call", "outcome": outcome}
        if outcome == "skipped":
            report["reason"] = f"Skipped: {extra}"
        elif isinstance(extra, dict):
            report["properties"] = extra
        elif extra:
            report["properties"] = {protocol.CHECKED: extra}
        lines += [report, {"event": "finish", "nodeid": node}]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _judge(tmp_path: Path, tests: dict) -> verdict.Outcome:
    return verdict.judge(OK, read_events(_events(tmp_path, tests)), suite=verdict.PROJECT, accelerator=None,
                         kernel=KERNEL, env=ENV, tests=tmp_path, options=TestOptions())


NEEDS = (f"{protocol.NEEDS_INPUTS}: pick refused guessed inputs (RuntimeError: where must be an int32 tensor); "
         "give INPUTS['pick'] the shapes and dtypes it expects: tests/test_index_ops_ops.py:55")


def test_an_op_that_needs_inputs_leaves_the_variant_untested_with_the_line_to_edit(tmp_path):
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_is_registered_with_its_schema[pick]": ("passed", protocol.CHECKED_REGISTRATION),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[gather_rows]": ("passed", protocol.CHECKED_RAN),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[pick]": ("skipped", NEEDS),
    })
    assert outcome.status == "untested"
    assert "1 op(s) of adopt's generated tests need inputs" in outcome.reason
    assert "pick refused guessed inputs (RuntimeError: where must be an int32 tensor)" in outcome.reason
    assert outcome.fix.startswith("edit INPUTS at tests/test_index_ops_ops.py:55")


def test_a_variant_whose_ops_need_inputs_does_not_read_as_one_no_test_ran_on(tmp_path):
    # tests ran (two passed), one op refused its guessed inputs: the table, the card and the report file say that
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_is_registered_with_its_schema[pick]": ("passed", protocol.CHECKED_REGISTRATION),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[gather_rows]": ("passed", protocol.CHECKED_RAN),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[pick]": ("skipped", NEEDS),
    })
    result = VariantTestResult("torch215-cxx11-cpu-x86_64-linux", outcome.status, None, True, reason=outcome.reason,
                               fix=outcome.fix, checks=outcome.checks)
    table = render_table([result])
    assert "untested: 1 generated test(s) need inputs (see fix)" in table
    assert "no test ran" not in table
    assert describe_test(result.entry()).startswith("untested: 1 generated test(s) need inputs (see fix) on CPU")
    assert VariantTestResult.from_entry(result.variant, result.entry()).checks == outcome.checks
    # a variant where nothing ran still says so
    nothing = VariantTestResult("v", "untested", None, False, reason="all 1 test(s) skipped")
    assert "untested (no test ran)" in render_table([nothing])
    assert describe_test(nothing.entry()).startswith("no test ran on CPU")


def test_a_pass_on_generated_tests_alone_rests_on_ops_run(tmp_path):
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_is_registered_with_its_schema[gather_rows]": ("passed", protocol.CHECKED_REGISTRATION),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[gather_rows]": ("passed", protocol.CHECKED_RAN),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[magnitude]": ("passed", protocol.CHECKED_RAN),
    })
    assert (outcome.status, outcome.suite, dict(outcome.checks)) == ("passed", "ops-run", {"ran": 2, "reference": 0})
    result = VariantTestResult("torch215-cxx11-cpu-x86_64-linux", "passed", None, True, suite=outcome.suite,
                               checks=outcome.checks)
    claim = "ops run only: 2 op(s) called and returned what their schemas say, none compared with a reference"
    assert f"the verdict rests on {claim} (the project has no tests of its own)" in render_table([result])
    assert describe_test(result.entry()) == f"passed ({claim}; the project has no tests of its own) on CPU"
    # the claim survives the report file (a result sent back from a job is read the same way)
    assert VariantTestResult.from_entry(result.variant, result.entry()).checks == result.checks


def test_ops_compared_with_a_reference_are_counted(tmp_path):
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[scale]": ("passed", protocol.CHECKED_REFERENCE),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[count]": ("passed", protocol.CHECKED_RAN),
    })
    entry = VariantTestResult("v", "passed", None, True, suite=outcome.suite, checks=outcome.checks).entry()
    assert describe_test(entry).startswith("passed (adopt's generated tests only: 2 op(s) called, 1 of them compared "
                                           "with the project's reference; the project has no tests of its own)")


def test_the_projects_own_tests_are_not_called_ops_run(tmp_path):
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[gather_rows]": ("passed", protocol.CHECKED_RAN),
        "tests/test_gather.py::test_gather_matches_numpy": ("passed", None),
    })
    assert (outcome.status, outcome.suite) == ("passed", "")


UNREGISTERED = (f"{protocol.NOT_REGISTERED}: radius_neighbors has no kernel for the CPU backend, the device of the "
                "inputs derived from the call at ops/radius.py:24 (NotImplementedError: Could not run "
                "'_geo_cuda_1a2b::radius_neighbors' with arguments from the 'CPU' backend. This could be because the "
                "operator doesn't exist for this backend); the kernel's registration leaves it out there: register "
                "radius_neighbors for CPU, or give INPUTS['radius_neighbors'] tensors of a device it is registered "
                "for: tests/test_geo_ops.py:47")


def test_an_op_not_registered_for_its_inputs_device_leaves_the_variant_untested_naming_the_registration(tmp_path):
    # GeoTransformer on the GPU machine: two ops skipped so were read as "need inputs", the fix pointing at INPUTS
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_is_registered_with_its_schema[radius_neighbors]": ("passed", protocol.CHECKED_REGISTRATION),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[radius_neighbors]": ("skipped", UNREGISTERED),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[pick]": ("skipped", NEEDS),
    })
    assert outcome.status == "untested"
    assert "1 op(s) of adopt's generated tests are not registered for the device of their inputs" in outcome.reason
    assert "radius_neighbors has no kernel for the CPU backend" in outcome.reason
    assert "1 op(s) of adopt's generated tests need inputs" in outcome.reason  # the other one still says so
    assert "register each op's kernel for that device's dispatch key" in outcome.fix
    assert dict(outcome.checks) == {protocol.CHECKED_NEEDS_INPUTS: 1, protocol.CHECKED_NOT_REGISTERED: 1}
    result = VariantTestResult("torch211-cxx11-cu130-x86_64-linux", outcome.status, None, True,
                               reason=outcome.reason, fix=outcome.fix, checks=outcome.checks)
    assert ("untested: 1 generated test(s) need inputs, 1 generated test(s) call ops not registered for their device "
            "(see fix)") in render_table([result])
    alone = _judge(tmp_path, {f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[radius_neighbors]":
                              ("skipped", UNREGISTERED)})
    assert alone.status == "untested" and "need inputs" not in alone.reason and "INPUTS at" not in alone.fix


REPLAY = "tests/test_rec_ops_original.py::test_call_gives_what_the_original_gave"


def _replayed(op: str, program: str) -> dict:
    return {protocol.CHECKED: protocol.CHECKED_ORIGINAL, protocol.REPLAYED: f"{op} {program}"}


def test_recorded_calls_that_match_the_original_say_how_many_of_which_ops_and_from_where(tmp_path):
    outcome = _judge(tmp_path, {
        f"{GENERATED}test_op_is_registered_with_its_schema[scale]": ("passed", protocol.CHECKED_REGISTRATION),
        f"{REPLAY}[scale-0]": ("passed", _replayed("scale", "demo.py")),
        f"{REPLAY}[scale-1]": ("passed", _replayed("scale", "README.md")),
        f"{REPLAY}[count-2]": ("passed", _replayed("count", "tests/test_ops.py")),
        f"{GENERATED}test_op_runs_on_inputs_of_its_declared_types[pick]": ("passed", protocol.CHECKED_RAN),
    })
    assert (outcome.status, outcome.suite) == ("passed", "ops-run")
    assert dict(outcome.checks) == {"ran": 1, "reference": 0, "original": 3, "original-ops": 2}
    assert outcome.recorded_from == ("README.md", "demo.py", "tests/test_ops.py")
    result = VariantTestResult("v", "passed", None, True, suite=outcome.suite, checks=outcome.checks,
                               recorded_from=outcome.recorded_from)
    claim = ("matches the original on 3 call(s) of 2 op(s) (recorded from README.md, demo.py, tests/test_ops.py); "
             "1 other op(s) run only")
    assert f"the kernel {claim} (the project has no tests of its own)" in render_table([result])
    assert describe_test(result.entry()) == f"passed ({claim}; the project has no tests of its own) on CPU"
    # a field of the report, not only prose: read back from the report file as a job sends it
    again = VariantTestResult.from_entry("v", result.entry())
    assert (again.checks, again.recorded_from) == (result.checks, result.recorded_from)


def test_the_projects_own_tests_joined_by_recorded_calls_say_both(tmp_path):
    outcome = _judge(tmp_path, {
        "tests/test_gather.py::test_gather_matches_numpy": ("passed", None),
        f"{REPLAY}[scale-0]": ("passed", _replayed("scale", "tests/test_gather.py")),
    })
    assert (outcome.status, outcome.suite, dict(outcome.checks)) == ("passed", "", {"original": 1, "original-ops": 1})
    entry = VariantTestResult("v", "passed", None, True, tests=read_events(tmp_path / "events.jsonl").counts,
                              checks=outcome.checks, recorded_from=outcome.recorded_from).entry()
    assert describe_test(entry) == ("passed (2 passed: the project's tests, and matches the original on 1 call(s) of "
                                    "1 op(s) (recorded from tests/test_gather.py)) on CPU")


def _recorded_failures(tmp_path: Path, failures: dict[str, str]) -> None:
    folder = tmp_path / protocol.RECORDED_DIR
    folder.mkdir(exist_ok=True)
    (folder / "marlin.json").write_text(json.dumps({protocol.ORIGINAL_FAILURES: failures, "calls": []}))


def test_a_test_that_fails_with_the_original_too_is_not_held_against_the_kernel(tmp_path):
    _recorded_failures(tmp_path, {"tests/test_test.py::Test::test_groups": "failed"})
    events = read_events(_events(tmp_path, {
        "tests/test_test.py::Test::test_tiles": ("passed", None),
        "tests/test_test.py::Test::test_groups": ("failed", None),
    }))
    failed = RunResult(("pytest",), 1, "")
    outcome = verdict.judge(failed, events, suite=verdict.PROJECT, accelerator=None, kernel=KERNEL, env=ENV,
                            tests=tmp_path, options=TestOptions())
    assert outcome.status == "passed", outcome
    assert outcome.warnings == ("1 test(s) fail with the original extension too (recorded by `publisher adopt "
                                "--record`): tests/test_test.py::Test::test_groups; they judge nothing of the port",)
    # a failure the original did not have is the kernel's
    _recorded_failures(tmp_path, {"tests/test_test.py::Test::test_other": "failed"})
    again = verdict.judge(failed, events, suite=verdict.PROJECT, accelerator=None, kernel=KERNEL, env=ENV,
                          tests=tmp_path, options=TestOptions())
    assert again.status == "failed"


def test_a_test_that_crashed_the_original_too_is_an_error_not_a_failure(tmp_path):
    _recorded_failures(tmp_path, {"tests/test_test.py::Test::test_errors": "crashed"})
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"event": "start", "nodeid": "tests/test_test.py::Test::test_errors"}) + "\n")
    crashed = RunResult(("pytest",), -11, "Fatal Python error: Segmentation fault")
    outcome = verdict.judge(crashed, read_events(path), suite=verdict.PROJECT, accelerator=None, kernel=KERNEL,
                            env=ENV, tests=tmp_path, options=TestOptions())
    assert outcome.status == "error" and outcome.reason.startswith(
        "crashed in tests/test_test.py::Test::test_errors, as the original extension did on the same test"), outcome
    (tmp_path / protocol.RECORDED_DIR / "marlin.json").unlink()
    assert verdict.judge(crashed, read_events(path), suite=verdict.PROJECT, accelerator=None, kernel=KERNEL,
                         env=ENV, tests=tmp_path, options=TestOptions()).status == "failed"
