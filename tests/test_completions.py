"""`publisher completions bash|zsh|fish`: each script is valid for its shell, and
completion works through click's protocol (the script asks `publisher` itself,
with $_PUBLISHER_COMPLETE): `publisher ch<TAB>` offers `check`, and init's
--backends completes backend lists. bash and fish complete for real here; zsh
only outside its completion system, which needs an interactive shell."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_helper import run_cli

BIN = Path(sys.executable).parent  # the environment's `publisher` console script, which the scripts call


def shell_env() -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")


def needs(shell: str) -> str:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} is not installed here (Debian: apt-get install {shell})")
    return path


def script(shell: str) -> str:
    result = run_cli("completions", shell)
    assert result.returncode == 0, result.output
    return result.stdout


def test_console_script_is_the_one_the_scripts_call():
    assert (BIN / "publisher").is_file()


@pytest.mark.parametrize("shell, check", [("bash", ["-n"]), ("zsh", ["-n"]), ("fish", ["--no-execute"])])
def test_script_is_valid_for_its_shell(tmp_path, shell, check):
    path = tmp_path / f"publisher.{shell}"
    path.write_text(script(shell))
    out = subprocess.run([needs(shell), *check, str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "_PUBLISHER_COMPLETE" in path.read_text()


def test_a_broken_script_is_caught_by_the_syntax_check(tmp_path):
    for shell, check, bad in (("bash", ["-n"], "f() {\n"), ("fish", ["--no-execute"], "function f\n")):
        path = tmp_path / f"bad.{shell}"
        path.write_text(bad)
        assert subprocess.run([needs(shell), *check, str(path)], capture_output=True, timeout=60).returncode != 0


def _bash_complete(tmp_path: Path, *words: str) -> list[str]:
    path = tmp_path / "publisher.bash"
    path.write_text(script("bash"))
    words_text = " ".join(f"'{w}'" for w in words)
    program = (f"source {path}; COMP_WORDS=({words_text}); COMP_CWORD={len(words) - 1}; "
               "_publisher_completion publisher; printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=shell_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_bash_completes_commands_and_backends(tmp_path):
    assert _bash_complete(tmp_path, "publisher", "ch") == ["check"]
    assert set(_bash_complete(tmp_path, "publisher", "")) >= {"init", "check", "build", "test", "push", "completions"}
    assert _bash_complete(tmp_path, "publisher", "init", "--backends", "cpu,c") == ["cpu,cuda"]
    assert _bash_complete(tmp_path, "publisher", "completions", "z") == ["zsh"]


def test_fish_completes_commands(tmp_path):
    fish = needs("fish")
    path = tmp_path / "publisher.fish"
    path.write_text(script("fish"))
    out = subprocess.run([fish, "--no-config", "-c", f"source {path}; complete -C 'publisher ch'"],
                         capture_output=True, text=True, env=shell_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert [line.split("\t")[0] for line in out.stdout.splitlines()] == ["check"]


@pytest.mark.parametrize("shell, cword, expected", [
    ("bash_complete", "1", "plain,check"),
    ("zsh_complete", "1", "plain\ncheck\n"),
    ("fish_complete", "ch", "plain,check\t"),
])
def test_completion_protocol_offers_check_for_ch(shell, cword, expected):
    env = dict(os.environ, _PUBLISHER_COMPLETE=shell, COMP_WORDS="publisher ch", COMP_CWORD=cword)
    result = run_cli(env=env, process=True)
    assert result.returncode == 0 and result.stdout.startswith(expected), result.output


def test_unknown_shell_is_a_usage_error():
    result = run_cli("completions", "powershell")
    assert result.returncode == 2 and "bash" in result.stderr and "Traceback" not in result.output
