"""The in-process contract layer: `run_cli` answers as the console script does,
and one in-process command leaves nothing behind that the next one could see."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from publisher import runner

from cli_helper import isolated, run_cli
from test_check import GOOD

REPO = Path(__file__).resolve().parents[1]
MATRIX = REPO / "publisher" / "resources" / "matrix.yaml"
SOFTCAP = REPO / "kernel_projects" / "softcap"


@pytest.mark.parametrize("argv", [
    ["check", "{dir}/build.toml", "--format", "json"],  # findings: exit 1, a JSON report
    ["check", "{dir}/nowhere"],  # usage error: exit 2 on stderr
    ["matrix", "{dir}", "--json"],
    ["--version"],
])
def test_in_process_answers_as_the_console_script_does(tmp_path, argv):
    (tmp_path / "build.toml").write_text(GOOD.replace("version = 1", "version = 'one'"))
    argv = [a.format(dir=tmp_path) for a in argv]
    inside, outside = run_cli(*argv), run_cli(*argv, process=True)
    assert (inside.returncode, inside.stdout, inside.stderr) == (outside.returncode, outside.stdout, outside.stderr)


def test_a_command_leaves_environment_cwd_and_signal_handlers_as_it_found_them(tmp_path):
    before_env, before_cwd = dict(os.environ), os.getcwd()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # main() installs its own SIGINT handler
    try:
        result = run_cli("check", "build.toml", env={"PATH": os.environ["PATH"], "ONLY_HERE": "1"}, cwd=tmp_path)
        assert result.returncode == 2 and "build.toml" in result.stderr  # it ran in tmp_path, which has none
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    assert dict(os.environ) == before_env and os.getcwd() == before_cwd


def test_a_command_sees_exactly_the_environment_it_is_given(tmp_path, monkeypatch):
    """Under GitHub Actions a build folds its log into ::group:: lines; the
    variable is set in this process, and the second command is not given it."""
    project = tmp_path / "softcap"
    shutil.copytree(SOFTCAP, project, ignore=shutil.ignore_patterns("build"))
    argv = ("build", project, "--local", "--no-hub-cache")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    folded = run_cli(*argv, "--out", tmp_path / "a")
    plain = run_cli(*argv, "--out", tmp_path / "b", env={k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"})
    assert folded.returncode == 0 and plain.returncode == 0, folded.output + plain.output
    assert "::group::" in folded.stderr and "::group::" not in plain.stderr


def test_a_file_changed_between_two_commands_is_read_again(tmp_path):
    """publisher memoises what it read (the matrix's toolkits); a user who edits
    the file between two runs gets the new answer, and so does the next test."""
    (tmp_path / "build.toml").write_text(GOOD)
    text = MATRIX.read_text()
    (tmp_path / "matrix.yaml").write_text(text)
    first = run_cli("check", tmp_path, "--config-only")
    cuda13 = '"13.0": ["7.5", "8.0", "8.6", "8.7", "8.9", "9.0", '
    assert cuda13 in text
    (tmp_path / "matrix.yaml").write_text(text.replace(cuda13, '"13.0": ["7.5", "8.0", "8.6", "8.7", "8.9", '))
    second = run_cli("check", tmp_path, "--config-only")
    assert "CUDA 13.0: 8.0 9.0;" in first.stdout, first.output
    assert "CUDA 13.0: 8.0;" in second.stdout, second.output  # 9.0 is no longer in CUDA 13.0's list


def test_a_cancelled_runner_does_not_refuse_the_next_command():
    with isolated():
        runner.kill_all()  # what Ctrl-C in a build leaves: the runner refuses new processes
    assert runner.run([sys.executable, "-c", "print('next')"]).output.strip() == "next"
