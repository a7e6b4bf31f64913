"""What a user sees: build progress (plain lines, GitHub Actions folds, the live
table), the build summary, findings as text and JSON, and the JSON error document."""

from __future__ import annotations

import io
import json

from publisher import ui
from publisher.cli import common
from publisher.findings import Finding, Severity, render_human, render_json, render_line


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_print_one_line_per_state_change_with_time_and_detail():
    out = io.StringIO()
    progress = ui.PlainLines(out)
    progress.start(["a", "b"])
    progress.line("a", "compiling relu.cu")  # compiler output is not echoed line by line
    progress.update("a", "built", seconds=75.2)
    progress.update("b", "failed", detail="nvcc: error", seconds=3.04)
    assert out.getvalue().splitlines() == [
        "building 2 variant(s): a, b",
        "a: built (1m15s)",
        "b: failed (3.0s nvcc: error)",
    ]


def test_github_actions_folds_each_finished_variant_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    log = tmp_path / "b.log"
    log.write_text("step 1\nerror: it broke\n")
    out = io.StringIO()
    progress = ui.make_progress(out)
    assert isinstance(progress, ui.GroupedLines)
    progress.update("b", "compiling")
    progress.update("b", "failed", detail="it broke", seconds=2.0, log=log)
    assert out.getvalue().splitlines() == [
        "b: compiling",
        "::group::b: failed (2.0s it broke)",
        "step 1",
        "error: it broke",
        "::endgroup::",
        "::error title=b failed::it broke",
    ]


def test_progress_kind_follows_the_stream(monkeypatch):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert isinstance(ui.make_progress(io.StringIO()), ui.PlainLines)  # a pipe or a file
    assert isinstance(ui.make_progress(Tty()), ui.LiveTable)
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(ui.make_progress(Tty()), ui.PlainLines)


def test_live_table_redraws_in_place_with_the_last_output_line():
    out = Tty()
    table = ui.LiveTable(out)
    table.start(["cpu-variant", "cu"])
    table.line("cu", "  [3/9] nvcc relu.cu  ")
    table.update("cpu-variant", "built", seconds=1.5)
    table.close()
    frames = out.getvalue()
    last = frames[frames.rindex("\x1b[F\x1b[F") + len("\x1b[F\x1b[F"):]  # the final redraw moves up over both rows
    rows = [line.removeprefix("\x1b[2K") for line in last.splitlines()]
    assert rows[0].split() == ["cpu-variant", "built", "1.5s"]
    assert rows[1].split()[:2] == ["cu", "queued"] and rows[1].endswith("[3/9] nvcc relu.cu")


def test_summary_gives_the_reason_for_every_variant_not_built_and_counts_states():
    text = ui.render_summary([
        {"variant": "torch-cpu", "state": "built", "seconds": 12.0},
        {"variant": "torch-cu", "state": "failed", "seconds": 61.0, "error": "relu.cu:3: error"},
        {"variant": "torch-rocm", "state": "unavailable", "reason": "no ROCm toolchain"},
        {"variant": "torch-old", "state": "fetched", "from": "org/k@v1"},
        {"variant": "torch-abi", "state": "built", "abi": {"ok": False, "violations": ["GLIBC_2.34", "x"]}},
    ])
    lines = text.splitlines()
    assert lines[0].split() == ["torch-cpu", "built", "12.0s"]
    assert lines[1].split() == ["torch-cu", "failed", "1m01s", "relu.cu:3:", "error"]
    assert lines[2].endswith("no ROCm toolchain")
    assert lines[3].endswith("from org/k@v1")
    assert lines[4].endswith("ABI: 2 violation(s), first: GLIBC_2.34")
    assert lines[-1] == "2 built, 1 failed, 1 unavailable, 1 fetched"
    assert ui.render_summary([]) == "nothing to build"


FINDINGS = [
    Finding("PB301", Severity.ERROR, "unknown CUDA capability 9.1", file="build.toml", line=7,
            hint="use one of the capabilities listed by `publisher check`", field="kernel.relu.cuda-capabilities"),
    Finding("PB203", Severity.WARNING, "license `MIT-ish`", file="build.toml", line=3),
    Finding("PB406", Severity.WARNING, "no tests/ folder", file="."),
]


def test_findings_as_text_group_by_file_errors_before_warnings_with_fix_and_counts():
    assert render_human(FINDINGS).splitlines() == [
        "build.toml",
        "     3  warning PB203  license `MIT-ish`",
        "     7  error   PB301  unknown CUDA capability 9.1",
        "          fix: use one of the capabilities listed by `publisher check`",
        "",
        ".",
        "     -  warning PB406  no tests/ folder",
        "",
        "1 error(s), 2 warning(s)",
    ]
    assert render_human([]) == ""


def test_findings_as_json_carry_code_severity_location_and_hint():
    doc = json.loads(render_json(FINDINGS[:1], ok=False, path="k"))
    assert doc == {"findings": [{"code": "PB301", "severity": "error", "message": "unknown CUDA capability 9.1",
                                 "file": "build.toml", "line": 7, "column": None,
                                 "hint": "use one of the capabilities listed by `publisher check`",
                                 "field": "kernel.relu.cuda-capabilities"}], "ok": False, "path": "k"}


def test_one_line_form_shows_code_message_and_fix():
    assert render_line(FINDINGS[0]) == ("PB301 unknown CUDA capability 9.1\n"
                                        "    fix: use one of the capabilities listed by `publisher check`")
    assert render_line(FINDINGS[2]) == "PB406 no tests/ folder"


def test_json_mode_is_read_from_the_command_line_before_parsing():
    assert common.wants_json(["push", "--json"])
    assert common.wants_json(["check", "--format", "json", "."])
    assert common.wants_json(["check", "--format=json"])
    assert not common.wants_json(["check", "--format", "human"])
    assert not common.wants_json(["check", "--format"])  # nothing after it: click reports the usage error
    assert not common.wants_json(["test", "--", "--json"])  # after --: an argument, not our flag


def test_json_error_document_is_printed_once_and_carries_the_findings(capsys):
    common.start_command()
    common.echo_error_json("push refused", "fix it", 1, FINDINGS[:1])
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert doc["error"] == {"message": "push refused", "hint": "fix it", "exit_code": 1}
    assert [f["code"] for f in doc["findings"]] == ["PB301"]

    common.start_command()
    common.echo_json({"plan": []})  # a report already on stdout: the error must not add a second document
    common.echo_error_json("refused", None, 1)
    assert json.loads(capsys.readouterr().out) == {"plan": []}

    common.start_command()
    common.echo_error_json("no such path", None, 2)  # no findings: the document keeps its usual shape
    assert set(json.loads(capsys.readouterr().out)) == {"ok", "error"}
