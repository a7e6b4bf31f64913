"""`publisher check` as a user runs it: exit codes, human and JSON output, and
no traceback whatever the input."""

from __future__ import annotations

import json
import os

import pytest

from cli_helper import run_cli
from test_check import GOOD


def run(*argv):
    result = run_cli("check", *argv)
    return result.returncode, result.stdout, result.stderr


def test_clean_file_exits_0(tmp_path):
    (tmp_path / "build.toml").write_text(GOOD)
    code, out, _ = run(tmp_path / "build.toml")
    assert code == 0
    assert "relu-kernel v1: build.toml OK" in out
    assert "PB305" in out  # architectures per toolkit


def test_errors_exit_1_grouped_by_file_with_line_and_fix(tmp_path):
    (tmp_path / "build.toml").write_text(GOOD.replace('name = "relu-kernel"', 'name = "relu_kernel"'))
    code, out, _ = run(tmp_path / "build.toml", "--quiet")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == str(tmp_path / "build.toml")
    assert any("2" in line.split()[0] and "PB201" in line for line in lines[1:])
    assert "fix: use e.g. `relu-kernel`" in out
    assert "1 error(s)" in out and "PB305" not in out


def test_warnings_only_exit_0(tmp_path):
    (tmp_path / "build.toml").write_text(GOOD.replace("edition = 5\n", ""))
    code, out, _ = run(tmp_path / "build.toml")
    assert code == 0 and "PB102" in out


def test_json_output(tmp_path):
    (tmp_path / "build.toml").write_text(GOOD.replace('"8.0", "9.0"', '"11.8"'))
    code, out, _ = run(tmp_path / "build.toml", "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    error = next(f for f in report["findings"] if f["code"] == "PB302")  # "11.8" alone leaves no capability
    assert error["severity"] == "error" and error["line"] == 22
    assert error["field"] == "kernel.relu_cuda.cuda-capabilities"
    unknown = next(f for f in report["findings"] if f["code"] == "PB301")
    assert unknown["severity"] == "warning" and "13.0" in unknown["hint"]  # names the toolkits and their lists


@pytest.mark.parametrize("make", [
    lambda p: p.write_text(""),
    lambda p: p.write_bytes(os.urandom(4096)),
    lambda p: p.write_bytes(b"\x00\xff\xfe garbage \x00"),
    lambda p: p.write_text("[general\nname = "),
    lambda p: p.write_text("x = " + "[" * 5000 + "]" * 5000),
    lambda p: p.write_text("# " + "x" * 500_000 + "\n[general]\nname = 1\n"),
    lambda p: p.write_text("[general]\n" + "".join(f"k{i} = {i}\n" for i in range(40_000))),
    lambda p: p.write_text("general = 1\ntorch = []\nkernel = 'x'\n"),
    lambda p: p.write_text("[general]\nname = []\nversion = {}\nlicense = 3\nbackends = 'cuda'\nedition = 5\n"
                           "[kernel.a]\nbackend = 1\n[kernel.b]\nsrc = 3\ndepends = [1]\n[torch]\nsrc = [[]]\nstable-abi = 4\n"),
    lambda p: p.write_text("[general]\nedition = 5.0\n"),
    lambda p: p.write_text("[[general]]\nname = 'x'\n"),
    lambda p: p.write_text('[general]\nname = "x"\n[kernel]\n"" = {}\n'),
])
def test_no_traceback_on_bad_input(tmp_path, make):
    path = tmp_path / "build.toml"
    make(path)
    code, out, err = run(path)
    assert code == 1
    assert "Traceback" not in out + err
    assert "error" in out


def test_folder_without_build_toml_is_a_usage_error(tmp_path):
    code, _, err = run(tmp_path)
    assert code == 2 and "no build.toml" in err


def test_missing_path_is_a_usage_error(tmp_path):
    code, _, err = run(tmp_path / "nope")
    assert code == 2 and "no such file" in err


def test_console_script_runs(tmp_path):
    (tmp_path / "build.toml").write_text(GOOD.replace("version = 1", "version = 'one'"))
    result = run_cli("check", tmp_path / "build.toml", "--format", "json", process=True)
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["findings"][0]["code"] == "PB106"
