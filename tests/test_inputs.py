"""Every input gets a clear answer: arbitrary strings (control characters,
NUL, bytes that are not UTF-8, very long ones) in every build.toml field and
in every environment variable publisher reads, through every command, end in
a documented exit code with no traceback, and in --json mode stdout is JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from publisher.errors import EXIT_ENVIRONMENT, EXIT_FAILED, EXIT_OK, EXIT_USAGE, PublisherError
from publisher.project import schema

from cli_helper import CliResult, run_cli

ROOT = Path(__file__).resolve().parents[1]
RMSNORM = ROOT / "kernel_projects" / "rmsnorm"
SOFTCAP = ROOT / "kernel_projects" / "softcap"
DOCUMENTED = (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT)
KERNEL = "rmsnorm_cpu"


def fuzz(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), database=None)


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`publisher ARGV` in-process, with `env` added to this process's environment."""
    result = run_cli(*argv, env=None if env is None else {**os.environ, **env})
    return result.returncode, result.stdout, result.stderr


def assert_clear_answer(argv: list[str], code: int, stdout: str, stderr: str) -> None:
    shown = f"{argv}\nexit {code}\nstdout: {stdout[-2000:]}\nstderr: {stderr[-2000:]}"
    assert code in DOCUMENTED, shown
    assert "Traceback" not in stderr + stdout, shown
    if "--json" in argv or "json" in argv:
        json.loads(stdout)
    for line in (stdout + stderr).splitlines():
        assert not line.rstrip().endswith(("None.", "None", "Bad request:", ": None")), shown
    assert "(0 failed)" not in stdout + stderr, shown


def commands(project: Path, scratch: Path) -> list[list[str]]:
    """Each command on `project`, by a path that is cheap but reads everything
    the command reads before its real work."""
    return [
        ["check", str(project), "--format", "json"],
        ["check", str(project)],
        ["matrix", str(project), "--json"],
        ["build", str(project), "--local", "--json", "--out", str(scratch / "out")],
        ["test", str(project), "--json", "--build-dir", str(scratch / "no-build")],
        ["push", "org/name", str(project), "--dry-run", "--json", "--allow-untested"],
        ["push", "org/name", str(project), "--dry-run", "--json"],  # refused: untested variants
        ["migrate", str(project), "--diff"],
    ]


# -- strings ------------------------------------------------------------------

_escaped_bytes = st.sampled_from([chr(c) for c in range(0xDC80, 0xDD00)])  # os.fsdecode of non-UTF-8 bytes
_controls = st.sampled_from([chr(c) for c in [*range(0, 32), 0x7F]])
_chars = st.one_of(st.characters(codec="utf-8"), _controls, _escaped_bytes)
arbitrary = st.one_of(
    st.text(_chars, max_size=40),
    st.builds(lambda s, n: (s or "a") * n, st.text(_chars, min_size=1, max_size=3), st.integers(100, 3000)),
    st.sampled_from(["", " ", "\0", "..", "../x", "/etc/passwd", "a/" * 200, "x" * 300, "\udcff\udcfe",
                     "http://127.0.0.1:99999", "http://[::1", "ftp://x", "not a url", "0", "-1", "abc",
                     "99999999999999999999999", "1e400", "nan", "inf"]),
)


def _toml_text(doc: tomlkit.TOMLDocument) -> bytes:
    # lone surrogates stand for bytes that are not UTF-8: write them as those bytes
    return tomlkit.dumps(doc).encode("utf-8", "surrogateescape")


def _set(doc, dotted: str, value) -> None:
    node = doc
    parts = dotted.split(".")
    for part in parts[:-1]:
        if part not in node or not isinstance(node[part], dict):
            node[part] = tomlkit.table()
        node = node[part]
    node[parts[-1]] = value


FIELDS = list(schema.fields(5, kernel_name=KERNEL))


def _value(kind: str, key: schema.Key):
    if kind == "strlist":
        return st.lists(arbitrary, max_size=3)
    if kind == "int":
        return st.one_of(arbitrary, st.integers(), st.integers(2**63, 2**80), st.integers(-(2**80), -1))
    if kind == "tablelist" and key.table:
        return st.lists(st.fixed_dictionaries({name: arbitrary for name in key.table}), max_size=2)
    return arbitrary


@st.composite
def field_edits(draw):
    path, key = draw(st.sampled_from(FIELDS))
    value = draw(st.one_of(_value(key.kind, key), arbitrary, st.lists(arbitrary, max_size=2)))
    return path, value


@pytest.fixture(scope="module")
def softcap_build(tmp_path_factory) -> Path:
    """softcap with its variants built once, for the commands that read build/."""
    project = tmp_path_factory.mktemp("softcap") / "softcap"
    shutil.copytree(SOFTCAP, project, ignore=shutil.ignore_patterns("build"))
    code, stdout, stderr = run(["build", str(project), "--local", "--json"])
    assert code == 0, stderr
    return project


@pytest.mark.slow  # a fuzzer: 60 examples x every command
@fuzz(60)
@given(field_edits())
def test_any_string_in_any_build_toml_field_gets_a_clear_answer(edit):
    path, value = edit
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "rmsnorm"
        shutil.copytree(RMSNORM, project, ignore=shutil.ignore_patterns("build"))
        doc = tomlkit.parse((RMSNORM / "build.toml").read_text())
        _set(doc, path, value)
        (project / "build.toml").write_bytes(_toml_text(doc))
        for argv in commands(project, Path(folder)):
            if argv[0] == "build":  # a cheap path: load, plan, select; nothing compiles
                argv = ["build", str(project), "--variant", "no-such-variant-*", "--json"]
            code, stdout, stderr = run(argv)
            assert_clear_answer(argv, code, stdout, stderr)


# -- environment --------------------------------------------------------------

_READS = re.compile(r"""(?:environ\.get\(|environ\[|getenv\(|envvar=)\s*["']([A-Z][A-Z0-9_]*)["']|"""
                    r"""["']([A-Z][A-Z0-9_]*)["']\s+in\s+os\.environ|["']((?:PUBLISHER|HF)_[A-Z0-9_]+)["']""")


def variables_publisher_reads() -> list[str]:
    names = set()
    for source in (ROOT / "publisher").rglob("*.py"):
        for match in _READS.finditer(source.read_text()):
            names.add(next(name for name in match.groups() if name))
    return sorted(names)


VARIABLES = variables_publisher_reads()


def test_the_variable_list_is_found_in_the_source():
    for name in ("HF_ENDPOINT", "PUBLISHER_HUB_RETRIES", "PUBLISHER_HUB_BACKOFF", "PUBLISHER_CACHE_DIR",
                 "PUBLISHER_DOCKER_BASE_IMAGE", "XDG_CACHE_HOME", "CXX"):
        assert name in VARIABLES


# no NUL: no environment can hold one
env_values = arbitrary.map(lambda s: s.replace("\0", ""))


@pytest.mark.slow  # a fuzzer: 25 examples x every command, build and test included
@fuzz(25)
@given(st.dictionaries(st.sampled_from(VARIABLES), env_values, min_size=1, max_size=3))
def test_any_value_of_any_environment_variable_gets_a_clear_answer(softcap_build, changes):
    # the Hub is never really asked: offline, or a closed local port, unless the example sets these
    base = {"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9", "PUBLISHER_HUB_RETRIES": "1"}
    if "HF_ENDPOINT" in changes:  # a made-up host must not be looked up
        changes = {**changes, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as folder:
        for argv in commands(softcap_build, Path(folder)):
            code, stdout, stderr = run(argv, {**base, **changes})
            assert_clear_answer(argv, code, stdout, stderr)


# -- the cases found by hand --------------------------------------------------

def _copy(source: Path, folder: Path) -> Path:
    project = folder / source.name
    shutil.copytree(source, project, ignore=shutil.ignore_patterns("build"))
    return project


def _edit(project: Path, old: str, new: str) -> None:
    path = project / "build.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


CPU_SRC = 'src = ["rmsnorm_cpu/rmsnorm_cpu.cpp"]'
UNUSABLE = {
    "a 300-character name": ('name = "rmsnorm"', f'name = "{"a" * 300}"', "file names are limited to 255"),
    "a src name over 255 bytes": (CPU_SRC, f'src = ["rmsnorm_cpu/{"b" * 300}.cpp"]', "file names are limited to 255"),
    "a NUL in a src path": (CPU_SRC, 'src = ["rmsnorm_cpu/a\\u0000b.cpp"]', "contains a NUL character"),
}


@pytest.mark.parametrize("case", list(UNUSABLE))
def test_unusable_names_and_paths_are_check_errors_in_every_command(tmp_path, case):
    old, new, message = UNUSABLE[case]
    project = _copy(RMSNORM, tmp_path)
    _edit(project, old, new)
    for argv in commands(project, tmp_path)[:-1]:  # migrate: an edition-5 file has nothing to migrate
        code, stdout, stderr = run(argv)
        assert_clear_answer(argv, code, stdout, stderr)
        assert code == EXIT_FAILED and message in stdout + stderr, (argv, stdout, stderr)
        if "--json" in argv:
            assert json.loads(stdout)["error"]["exit_code"] == EXIT_FAILED


@pytest.mark.parametrize("kind, message", [
    ("folder", "build.toml is a folder"),
    ("fifo", "build.toml is a FIFO"),
    ("dangling", "build.toml is a symlink to `nowhere`, which does not exist"),
])
def test_a_build_toml_that_is_not_a_file_is_named(tmp_path, kind, message):
    project = _copy(SOFTCAP, tmp_path)
    (project / "build.toml").unlink()
    {"folder": lambda p: p.mkdir(), "fifo": os.mkfifo, "dangling": lambda p: p.symlink_to("nowhere")}[kind](
        project / "build.toml")
    code, stdout, stderr = run(["check", str(project), "--format", "json"])
    assert code == EXIT_USAGE and message in stderr
    assert message in json.loads(stdout)["error"]["message"]


@pytest.mark.parametrize("kind, message", [("folder", "is a folder, not a file"), ("fifo", "is a FIFO (named pipe), not a file")])
def test_a_src_entry_that_is_not_a_regular_file_fails_check(tmp_path, kind, message):
    project = _copy(RMSNORM, tmp_path)
    {"folder": lambda p: p.mkdir(), "fifo": os.mkfifo}[kind](project / "odd")
    _edit(project, CPU_SRC, 'src = ["rmsnorm_cpu/rmsnorm_cpu.cpp", "odd"]')
    code, stdout, _ = run(["check", str(project), "--format", "json"])
    found = [f for f in json.loads(stdout)["findings"] if f["code"] == "PB401"]
    assert code == EXIT_FAILED and [f["message"] for f in found] == [f"kernel.rmsnorm_cpu.src: `odd` {message}"]
    lines = (project / "build.toml").read_text().splitlines()
    assert found[0]["line"] == lines.index('src = ["rmsnorm_cpu/rmsnorm_cpu.cpp", "odd"]') + 1


@pytest.mark.parametrize("text, message, line", [
    ("", "build.toml is empty", 1),
    ("# nothing here\n\n", "build.toml is empty", 1),
    ('[package]\nname = "x"\n\n[dependencies]\nserde = "1"\n', "found [package], [dependencies]", 1),
    ('title = "x"\n[tool.black]\nline-length = 100\n', "found `title`, [tool]", 1),
])
def test_an_empty_or_foreign_build_toml_is_named_not_called_legacy(tmp_path, text, message, line):
    (tmp_path / "build.toml").write_text(text)
    code, stdout, _ = run(["check", str(tmp_path / "build.toml"), "--format", "json"])
    findings = json.loads(stdout)["findings"]
    assert code == EXIT_FAILED and [f["code"] for f in findings] == ["PB108"]
    assert message in findings[0]["message"] and findings[0]["line"] == line
    code, _, stderr = run(["migrate", str(tmp_path / "build.toml")])
    assert code == EXIT_FAILED and "cannot migrate" in stderr and message in stderr


def test_a_legacy_file_names_its_unknown_top_level_tables(tmp_path):
    (tmp_path / "build.toml").write_text('[general]\nname = "old"\n\n[torch]\nsrc = []\n\n[tool.black]\nx = 1\n')
    code, stdout, _ = run(["check", str(tmp_path / "build.toml"), "--format", "json"])
    unknown = [f for f in json.loads(stdout)["findings"] if f["code"] == "PB104"]
    assert code == EXIT_FAILED and [(f["message"], f["line"]) for f in unknown] == [("unknown key `tool` in the top level", 7)]


@pytest.mark.parametrize("version, refused", [(2**63 - 1, False), (2**63, True), (10**30, True)])
def test_a_version_beyond_64_bits_is_refused(tmp_path, version, refused):
    project = _copy(SOFTCAP, tmp_path)
    _edit(project, "version = 1", f"version = {version}")
    code, stdout, _ = run(["check", str(project), "--format", "json"])
    codes = [f["code"] for f in json.loads(stdout)["findings"]]
    assert ("PB202" in codes) == refused and (code == EXIT_FAILED) == refused


def _subprocess_push(project: Path, env: dict[str, str], *extra: str) -> CliResult:
    """A fresh interpreter: huggingface_hub reads HF_ENDPOINT while it is imported."""
    return run_cli("push", "org/name", project, "--dry-run", "--json", "--allow-untested", *extra,
                   env={**os.environ, **env}, process=True)


@pytest.mark.parametrize("value, problem", [
    ("http://127.0.0.1:99999", "is not a URL"), ("http://[::1", "is not a URL"), ("not a url", "is not an http"),
    ("", "is empty"), ("ftp://example.org", "is not an http"),
])
def test_a_bad_hf_endpoint_is_a_usage_error_naming_it_not_a_retry(softcap_build, value, problem):
    done = _subprocess_push(softcap_build, {"HF_ENDPOINT": value, "PUBLISHER_HUB_BACKOFF": "30"})
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr, done.stderr
    assert f"HF_ENDPOINT={value!r} {problem}" in done.stderr and "retry" not in done.stderr
    assert json.loads(done.stdout)["error"]["exit_code"] == EXIT_USAGE
    for argv in (["check", str(softcap_build)], ["matrix", str(softcap_build)]):  # these never need the Hub
        assert run(argv, {"HF_ENDPOINT": value})[0] == EXIT_OK


@pytest.mark.parametrize("variable, value", [
    ("PUBLISHER_HUB_RETRIES", "abc"), ("PUBLISHER_HUB_RETRIES", "0"), ("PUBLISHER_HUB_RETRIES", "-2"),
    ("PUBLISHER_HUB_BACKOFF", "soon"), ("PUBLISHER_HUB_BACKOFF", "nan"), ("PUBLISHER_HUB_BACKOFF", "-1"),
])
def test_a_bad_retry_setting_is_a_usage_error_naming_it(softcap_build, variable, value):
    code, stdout, stderr = run(["push", "org/name", str(softcap_build), "--dry-run", "--json", "--allow-untested"],
                               {variable: value, "HF_HUB_OFFLINE": "1"})
    assert code == EXIT_USAGE and f"{variable}={value!r}" in stderr
    assert json.loads(stdout)["error"]["exit_code"] == EXIT_USAGE


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("setting", ["offline", "unreachable"])
def test_a_dry_run_without_the_hub_plans_from_the_build(softcap_build, setting):
    env = {"HF_HUB_OFFLINE": "1"} if setting == "offline" else {
        "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{_closed_port()}"}
    code, stdout, stderr = run(["push", "org/name", str(softcap_build), "--dry-run", "--json", "--allow-untested"],
                               {**env, "PUBLISHER_HUB_RETRIES": "5", "PUBLISHER_HUB_BACKOFF": "30"})
    assert code == EXIT_OK, stderr
    report = json.loads(stdout)
    assert report["hub"]["compared"] is False and report["hub"]["problem"]
    built = sorted(p.name for p in (softcap_build / "build").iterdir() if not p.name.startswith("."))
    assert sorted(report["plan"]["groups"]) == sorted([*built, "public API"])  # the API record goes with the build
    assert all(g["unchanged"] == 0 and g["added"] for g in report["plan"]["groups"].values())
    assert "could not compare with the Hub" in stderr and "retry" not in stderr and "try again later" not in stderr
    if setting == "offline":
        assert "HF_HUB_OFFLINE" in report["hub"]["problem"]
        code, stdout, stderr = run(["push", "org/name", str(softcap_build), "--allow-untested", "--json"], env)
        assert code == EXIT_ENVIRONMENT and "unset HF_HUB_OFFLINE" in stderr and json.loads(stdout)["error"]


def test_a_missing_repository_is_not_blamed_on_the_token(hub_env):
    from publisher.push.hub_client import HubClient, RetryPolicy

    client = HubClient(retry=RetryPolicy(attempts=1))
    with pytest.raises(PublisherError) as raised:
        client.branches(f"org/gone-{uuid.uuid4().hex[:8]}")
    assert "repository not found" in raised.value.message
    assert "token" not in raised.value.hint.lower() and "deleted or renamed" in raised.value.hint


@pytest.mark.parametrize("status", [400, 403, 404, 500])
def test_hub_errors_without_a_server_message_say_so(status):
    """The Hub does not always explain itself; the message must not end in "None." or a bare "Bad request:"."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    from publisher.push.hub_client import HubClient

    response = httpx2.Response(status, request=httpx2.Request("GET", "http://127.0.0.1:9/api/kernels/org/name/refs"))
    with pytest.raises(Exception) as raised:
        hf_raise_for_status(response)
    translated = HubClient(endpoint="http://127.0.0.1:9", token="hf_" + "x" * 34).translate("list refs", raised.value)
    text = translated.message if isinstance(translated, PublisherError) else str(translated)
    assert not text.rstrip().endswith(("None.", "None", ":")), text
    assert "None." not in text, text


def test_a_crashed_test_run_is_not_called_zero_failures(tmp_path):
    project = _copy(SOFTCAP, tmp_path)
    # the crash comes while the tests are collected: no test ran, none failed
    (project / "tests" / "test_softcap.py").write_text("import os, signal\n\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    variant = "torch-cpu"
    assert run(["build", str(project), "--local", "--variant", variant, "--json"])[0] == EXIT_OK
    code, stdout, stderr = run(["test", str(project), "--variant", variant, "--all-tests", "--json"])
    assert code == EXIT_FAILED, stderr
    code, stdout, stderr = run(["push", "org/name", str(project), "--variant", variant])
    assert code == EXIT_FAILED and "crashed (SIGSEGV)" in stderr, stderr
    assert "(0 failed)" not in stderr


def test_a_missing_dependency_is_named_with_the_fix_not_called_a_bug(softcap_build, tmp_path):
    """publisher installed without its dependencies (or with one pinned too old by another
    package): the commands that need it say which package and how to install it."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['httpx2'] = None  # as if not installed\n")
    env = {**os.environ, "PYTHONPATH": f"{hide}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for argv in (["push", "your-org/softcap", str(softcap_build), "--dry-run"], ["build", str(softcap_build), "--local"]):
        result = run_cli(*argv, env=env, process=True, timeout=300)
        assert result.returncode == EXIT_ENVIRONMENT, (argv, result.stderr)
        assert "httpx2" in result.stderr and "pip install --upgrade kernel-publisher" in result.stderr
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr
