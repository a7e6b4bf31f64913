"""The options layer: command lines become frozen, checked option values; the
environment variables of publisher's own are read in one module."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import publisher
from publisher import env
from publisher.cli import main
from publisher.errors import UsageError
from publisher.findings import Severity
from publisher.options import (
    BuildCommandOptions,
    CheckOptions,
    HubServerOptions,
    MatrixOptions,
    MigrateOptions,
    PushOptions,
    ReleaseOptions,
    Selection,
    TestCommandOptions,
    TestOptions,
)

from cli_helper import run_cli

SOURCE = Path(publisher.__file__).parent
# Files that run inside a variant's test environment, without publisher importable:
# they read the variables publisher sets for them (the test protocol).
CHILD_SIDE = {"testing/plugin.py", "testing/default_test.py"}
EXAMPLE = SOURCE.parent / "kernel_projects" / "rmsnorm"


def test_push_arguments_one_folder_is_the_path(tmp_path):
    options = PushOptions.from_args((str(tmp_path),))
    assert (options.repo_id, options.path) == (None, tmp_path)
    options = PushOptions.from_args(("org/kernel",))
    assert (options.repo_id, options.path) == ("org/kernel", Path("."))
    options = PushOptions.from_args(("org/kernel", str(tmp_path)), dry_run=True)
    assert (options.repo_id, options.path, options.dry_run) == ("org/kernel", tmp_path, True)


def test_push_arguments_too_many_is_a_usage_error():
    with pytest.raises(UsageError, match=r"too many arguments: expected \[REPO_ID\] \[PATH\]"):
        PushOptions.from_args(("a/b", ".", "extra"))


def test_a_bad_signer_workflow_names_the_option_and_the_expected_form():
    with pytest.raises(UsageError) as err:
        PushOptions.from_args(("org/kernel",), signer_workflow="not a workflow")
    assert err.value.message.startswith("--signer-workflow (or GITHUB_WORKFLOW_REF): ")
    assert ".github/workflows/release.yml@refs/heads/main" in err.value.hint
    good = PushOptions.from_args(("org/kernel",), signer_workflow="org/repo/.github/workflows/release.yml@refs/heads/main")
    assert good.signer is not None


def test_options_are_frozen():
    options = PushOptions(path=Path("."))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.dry_run = True  # type: ignore[misc]


def test_build_folder_defaults_to_path_build_and_follows_out(tmp_path):
    assert BuildCommandOptions(path=tmp_path).build_dir == (tmp_path / "build").resolve()
    assert BuildCommandOptions(path=tmp_path, out=tmp_path / "elsewhere").build_dir == (tmp_path / "elsewhere").resolve()


def test_release_hands_its_choices_to_the_build_and_push_steps(tmp_path):
    release = ReleaseOptions(path=tmp_path, repo_id="org/kernel", selection=Selection(("torch2*",), ("*cu126*",)),
                             local=True, allow_untested=True, load_only=("*rocm*",), partial=True,
                             matrix_file=tmp_path / "m.yaml", endpoint="http://127.0.0.1:1", private=True,
                             dry_run=True, hub_cache=False)
    build = release.build()
    assert (build.path, build.selection, build.local, build.backend) == (tmp_path, release.selection, True, "local")
    assert (build.repo_id, build.hub_cache, build.endpoint, build.matrix_file) == (
        "org/kernel", False, "http://127.0.0.1:1", tmp_path / "m.yaml")
    push = release.push()
    assert (push.path, push.repo_id, push.selection) == (tmp_path, "org/kernel", release.selection)
    assert (push.allow_untested, push.load_only, push.partial, push.private, push.dry_run) == (
        True, ("*rocm*",), True, True, True)
    assert (push.create_pr, push.branch, push.card, push.signer) == (False, None, True, None)


def test_publisher_settings_are_read_from_the_environment(monkeypatch):
    for name in ("PUBLISHER_CACHE_DIR", "PUBLISHER_DOCKER_BASE_IMAGE", "PUBLISHER_NIX_KERNEL_BUILDER",
                 "PUBLISHER_HUB_LOG", "PUBLISHER_DOCKER_CACHE_VOLUME"):
        monkeypatch.delenv(name, raising=False)
    assert (env.cache_dir(), env.docker_base_image(), env.nix_kernel_builder(), env.hub_server_log()) == (
        None, None, None, False)
    assert env.docker_cache_volume() == "publisher-cache"
    monkeypatch.setenv("PUBLISHER_CACHE_DIR", "/c")
    monkeypatch.setenv("PUBLISHER_DOCKER_BASE_IMAGE", "img:1")
    monkeypatch.setenv("PUBLISHER_NIX_KERNEL_BUILDER", "path:/kb")
    monkeypatch.setenv("PUBLISHER_HUB_LOG", "1")
    monkeypatch.setenv("PUBLISHER_DOCKER_CACHE_VOLUME", "vol")
    assert (env.cache_dir(), env.docker_base_image(), env.nix_kernel_builder(), env.hub_server_log()) == (
        "/c", "img:1", "path:/kb", True)
    assert env.docker_cache_volume() == "vol"


def test_publisher_variables_are_read_only_in_env_py():
    reads = re.compile(r"""(?:environ\.get\(|environ\[|getenv\()\s*["'](PUBLISHER_\w+)""")
    readers = {}
    for path in SOURCE.rglob("*.py"):
        where = str(path.relative_to(SOURCE))
        if where != "env.py" and where not in CHILD_SIDE:
            for name in reads.findall(path.read_text(encoding="utf-8")):
                readers.setdefault(name, []).append(where)
    assert readers == {}


def test_test_children_read_only_the_protocol_names():
    from publisher.testing import protocol

    named = set()
    for child in ("plugin.py", "default_test.py", "device.py"):
        named |= set(re.findall(r"\bPUBLISHER_[A-Z_]+\b", (SOURCE / "testing" / child).read_text(encoding="utf-8")))
    assert named and named <= set(protocol.NAMES), sorted(named - set(protocol.NAMES))


def test_each_backend_takes_the_settings_it_reads(tmp_path):
    from publisher.backends import get_backend
    from publisher.options import BackendSettings
    from publisher.project.load import require_project

    from push_fixtures import write_scale

    write_scale(tmp_path / "scale")
    project = require_project(tmp_path / "scale")
    settings = BackendSettings(base_image="example.org/builder:1", index_url="https://pypi.example.org/simple",
                               matrix_file=tmp_path / "m.yaml", nix_bundle=True)
    docker = get_backend("docker", project, settings)
    assert (docker.name, docker.base_image, docker.matrix_file) == (
        "docker", "example.org/builder:1", (tmp_path / "m.yaml").resolve())
    assert get_backend("nix", project, settings).bundle is True
    assert get_backend("nix", project).bundle is False
    assert get_backend("local", project, settings).name == "local"
    with pytest.raises(UsageError, match="unknown build backend 'podman'"):
        get_backend("podman", project, settings)


def test_only_the_commands_know_click():
    """Only publisher/cli/ parses command lines: options, stages and renderers can be called from code as they are."""
    importing = sorted(str(path.relative_to(SOURCE)) for path in SOURCE.rglob("*.py")
                       if path.relative_to(SOURCE).parts[0] != "cli"
                       and re.search(r"^\s*(import click|from click)", path.read_text(encoding="utf-8"), re.M))
    assert importing == []


class _Stop(BaseException):  # not Exception: main() turns those into "internal error"
    """Raised by a stand-in stage: the command got as far as handing over its options."""


def _options_handed_to(monkeypatch, module: str, stage: str, argv: list[str]):
    """Run `publisher ARGV` in process with the command's stage replaced; return the options it received."""
    import importlib

    received = []

    def stand_in(options, *args, **kwargs):
        received.append(options)
        raise _Stop

    monkeypatch.setattr(importlib.import_module(f"publisher.cli.{module}"), stage, stand_in)
    with pytest.raises(_Stop):
        main(argv)
    return received[0]


def test_each_command_turns_its_command_line_into_its_options_type(monkeypatch, tmp_path):
    m = tmp_path / "m.yaml"
    assert _options_handed_to(monkeypatch, "check", "run_check",
                              ["check", str(tmp_path), "--config-only", "-q", "--matrix", str(m)]) == CheckOptions(
        path=tmp_path, config_only=True, quiet=True, matrix_file=m)
    assert _options_handed_to(monkeypatch, "matrix", "run_matrix",
                              ["matrix", str(tmp_path), "--variant", "torch2*", "--variant", "*cpu*", "--skip", "*rocm*",
                               "--required-only", "--matrix", str(m)]) == MatrixOptions(
        path=tmp_path, selection=Selection(("torch2*", "*cpu*"), ("*rocm*",)), required_only=True, matrix_file=m)
    assert _options_handed_to(monkeypatch, "migrate", "run_migrate",
                              ["migrate", str(tmp_path), "--check", "--diff", "--license", "mit", "--version", "3"]) == (
        MigrateOptions(path=tmp_path, check_only=True, show_diff=True, license="mit", version=3))
    assert _options_handed_to(monkeypatch, "test", "run_project_tests",
                              ["test", str(tmp_path), "--variant", "a*", "--skip", "b*", "--repo-id", "org/k",
                               "--allow-load-only", "--timeout", "60", "--all-tests", "--test-timeout", "5",
                               "--build-dir", str(tmp_path / "out"), "--matrix", str(m)]) == TestCommandOptions(
        path=tmp_path, selection=Selection(("a*",), ("b*",)),
        tests=TestOptions(repo_id="org/k", timeout=60, test_timeout=5, require_gpu=False, all_tests=True),
        build_dir=tmp_path / "out", matrix_file=m)
    assert _options_handed_to(monkeypatch, "hub_server", "open_server",
                              ["hub-server", "--data-dir", str(tmp_path), "--port", "0", "--token", "w1",
                               "--read-token", "r1", "--trusted-org", "org"]) == HubServerOptions(
        data_dir=tmp_path, port=0, tokens=("w1",), read_tokens=("r1",), trusted_orgs=("org",))


def test_test_variants_are_in_path_build_unless_a_build_dir_is_given(tmp_path):
    assert TestCommandOptions(path=tmp_path).variants_dir == tmp_path / "build"
    assert TestCommandOptions(path=tmp_path, build_dir=tmp_path / "b").variants_dir == tmp_path / "b"


def test_hub_server_generates_a_write_token_only_without_token(tmp_path):
    given = HubServerOptions.from_args(data_dir=tmp_path, port=0, tokens=("mine",))
    assert (given.tokens, given.generated_token) == (("mine",), False)
    made = HubServerOptions.from_args(data_dir=tmp_path, port=0, tokens=())
    again = HubServerOptions.from_args(data_dir=tmp_path, port=0, tokens=())
    assert made.generated_token and re.fullmatch(r"hf_[A-Za-z0-9]{34}", made.tokens[0])
    assert made.tokens != again.tokens


@pytest.mark.parametrize("port", [-1, 65536, 70000])
def test_a_port_out_of_range_is_a_usage_error_not_a_crash(tmp_path, port):
    with pytest.raises(UsageError, match=f"--port: {port} is not a TCP port"):
        HubServerOptions(data_dir=tmp_path, port=port)
    result = run_cli("hub-server", "--data-dir", tmp_path / "data", "--port", port)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: --port: {port} is not a TCP port\n  hint: ") and "Traceback" not in result.stderr


def test_check_and_matrix_stages_run_from_code_and_return_values():
    from publisher.plan.stage import run_matrix
    from publisher.project.stage import run_check

    everything = run_check(CheckOptions(path=EXAMPLE))
    quiet = run_check(CheckOptions(path=EXAMPLE, quiet=True))
    assert everything.project is not None and everything.project.name == "rmsnorm"
    assert any(f.severity is Severity.INFO for f in everything.findings)
    assert quiet.findings == tuple(f for f in everything.findings if f.severity is not Severity.INFO)
    planned = run_matrix(MatrixOptions(path=EXAMPLE))
    included = {d.variant for d in planned.plan.decisions if d.included}
    assert planned.chosen and {p.name for p in planned.chosen} == included
    required = run_matrix(MatrixOptions(path=EXAMPLE, required_only=True, selection=Selection(skip=("*cpu*",))))
    assert all(p.required and "cpu" not in p.name for p in required.chosen)
    assert {p.name for p in required.chosen} <= included


def test_migrate_stage_writes_only_when_asked(tmp_path):
    from test_migrate import V3

    from publisher.project.stage import run_migrate

    legacy = tmp_path / "build.toml"
    legacy.write_text(V3)
    shown = run_migrate(MigrateOptions(path=tmp_path, show_diff=True, license="mit", version=1))
    checked = run_migrate(MigrateOptions(path=tmp_path, check_only=True, license="mit", version=1))
    assert shown.migration.needed and not shown.written and not checked.written
    assert legacy.read_text() == V3
    written = run_migrate(MigrateOptions(path=tmp_path, license="apache-2.0", version=1))
    assert written.written and legacy.read_text() == written.migration.migrated != V3
    assert not run_migrate(MigrateOptions(path=tmp_path)).migration.needed


def test_migrate_check_reports_an_unreadable_file_instead_of_stopping(tmp_path):
    from publisher.errors import ProjectError
    from publisher.project.stage import run_migrate

    (tmp_path / "build.toml").write_text("[general\n")
    result = run_migrate(MigrateOptions(path=tmp_path, check_only=True))
    assert result.migration is None and "build.toml" in result.error.render()
    with pytest.raises(ProjectError):
        run_migrate(MigrateOptions(path=tmp_path))
