"""`publisher adopt --record`: the original extension built its author's way,
the project's own script and README run with every call into it recorded, and
the replay tests adopt writes judge the kernel against those calls: a right
port passes saying it matches the original on N calls of M ops (recorded from
where), a wrong one fails naming the first call that differs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from adopt_fixtures import write_recorded_project, write_setup_project
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, dict]:
    root = write_recorded_project(tmp_path_factory.mktemp("record") / "rec")
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    done = run_cli("adopt", str(root), "--record", "--force", "--json", timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    return root, json.loads(done.stdout)


@pytest.mark.slow
def test_the_projects_calls_into_the_original_are_recorded_with_what_they_wrote(recorded):
    root, report = recorded
    recording = report["recording"]
    # demo.py: scale, add_into, argmax_rows, count_positive (its refused argmax_rows call is not recorded);
    # README.md's code block: scale on float64
    assert (recording["calls"], recording["seen"], sorted(recording["ops"])) == \
        (5, 5, ["add_into", "argmax_rows", "count_positive", "scale"]), recording
    assert recording["from"] == ["demo.py", "README.md"] and recording["nondeterministic"] == []
    calls = json.loads((root / "tests/recorded/rec_ops.json").read_text())["calls"]
    (add_into,) = [c for c in calls if c["op"] == "add_into"]
    assert list(add_into["mutated"]) == ["0"] and add_into["where"] == "demo.py:8"  # `out`, written by the call
    assert "add_into" not in (root / "tests/test_rec_ops_ops.py").read_text().split("INPUTS = {")[1]


@pytest.mark.slow
def test_a_right_port_passes_as_matching_the_original_on_its_recorded_calls(recorded):
    root, _ = recorded
    built = run_cli("build", str(root), "--local", "--json", timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    assert tested.returncode == 0 and variant["status"] == "passed", variant
    assert variant["checks"]["original"] == 5 and variant["checks"]["original-ops"] == 4, variant
    assert variant["recorded_from"] == ["README.md", "demo.py"]
    shown = run_cli("test", str(root), timeout=1200).stdout
    assert "matches the original on 5 call(s) of 4 op(s) (recorded from README.md, demo.py)" in shown


@pytest.mark.slow
def test_a_wrong_kernel_fails_naming_the_first_call_that_differs_from_the_original(recorded, tmp_path):
    root, _ = recorded
    wrong = tmp_path / "rec"
    shutil.copytree(root, wrong, ignore=shutil.ignore_patterns("build"))
    source = wrong / "csrc/rec.cpp"
    source.write_text(source.read_text().replace("return x * factor;", "return x * (factor + 1e-4);"))
    built = run_cli("build", str(wrong), "--local", "--json", timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    tested = run_cli("test", str(wrong), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    assert variant["status"] == "failed", variant
    assert "scale on the call recorded from demo.py (demo.py:6): output 0: Tensor-likes are not close!" \
        in variant["reason"], variant["reason"]


def test_with_nothing_to_run_the_recording_says_why_and_the_tests_fall_back_to_derived_inputs(tmp_path):
    root = write_setup_project(tmp_path / "mini")  # no tests, scripts or README code: nothing builds or runs
    done = run_cli("adopt", str(root), "--record", "--dry-run", "--json")
    report = json.loads(done.stdout)
    assert report["recording"]["why_not"] == \
        "the project has no tests, scripts or README code that could call the original"
    (said,) = [f for f in report["findings"] if f["code"] == "PA196"]
    assert "the generated tests guess each op's inputs" in said["message"]
    assert [f["path"] for f in report["files"] if f["path"].startswith("tests/")] == ["tests/test_mini_ops_ops.py"]


def test_a_test_that_crashes_the_original_is_named_and_the_rest_run_again_without_it(tmp_path):
    from publisher.adopt import record

    root = tmp_path / "p"
    (root / "tests").mkdir(parents=True)
    (root / "test.py").write_text("def test_a():\n    pass\n")
    lines = [{"test": "test.py::test_a", "outcome": "started"}, {"test": "test.py::test_a", "outcome": "failed",
                                                                 "when": "call"},
             {"test": "test.py::test_b", "outcome": "started"}]
    assert record._crashed(lines) == "test.py::test_b"
    # named as adopt carries them: test.py beside setup.py becomes tests/test_test.py
    assert record._failures(lines, root) == (("tests/test_test.py::test_a", "failed"),
                                             ("tests/test_test.py::test_b", "crashed"))
    lines += [{"test": "test.py::test_a", "outcome": "started"},
              {"test": "test.py::test_a", "outcome": "passed", "when": "call"}]  # the run again, without test_b
    assert record._crashed(lines) is None


def test_record_on_a_folder_without_an_extension_says_so_and_writes_nothing_there(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_cli("adopt", str(empty), "--record")
    assert done.returncode != 0 and "no torch extension found" in done.output
    assert "Traceback" not in done.output and list(empty.iterdir()) == []
