"""Typed options of every command: frozen values built from the parsed command
line, checked here and only here, so a stage function receives values it can
trust and never sees click. How a result is shown (--json, --format) stays with
the command's renderer."""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from publisher.errors import UsageError
from publisher.project.model import BACKENDS
from publisher.project.schema import suggest
from publisher.project.values import license_problem
from publisher.push.signature import SignerWorkflow
from publisher.scaffold.names import KernelNames, names_for
from publisher.scaffold.templates import DEFAULT_BACKENDS, OFFERED_BACKENDS
from publisher.scaffold.workflow import WorkflowRef, parse_ref


@dataclass(frozen=True)
class TestOptions:
    __test__ = False  # not a pytest test class

    repo_id: str | None = None  # --repo-id, else [general.hub] repo-id, else found in tests/
    timeout: float = 1800.0  # the whole variant (subprocess), seconds
    test_timeout: float = 300.0  # one test (pytest-timeout, when installed), seconds
    require_gpu: bool = True  # False (--allow-load-only): "loaded, not run" does not fail the run
    all_tests: bool = False  # run all of tests/, not only the kernels_ci-marked tests


@dataclass(frozen=True)
class BackendSettings:
    """The options only one backend reads; each backend's `from_settings` takes what it needs."""

    base_image: str | None = None  # docker: image the builder is made from
    ca_bundle: Path | None = None  # docker: CA bundle for downloads inside the build
    index_url: str | None = None  # docker: package index for toolchains
    extra_index_urls: tuple[str, ...] = ()  # docker
    matrix_file: Path | None = None  # docker: the matrix naming the toolchains
    nix_bundle: bool = False  # nix: build the flake's `bundle` once


@dataclass(frozen=True)
class Selection:
    """--variant / --skip globs."""

    include: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckOptions:
    path: Path
    config_only: bool = False  # build.toml only, even for a folder
    quiet: bool = False  # leave out info findings
    matrix_file: Path | None = None


@dataclass(frozen=True)
class MatrixOptions:
    path: Path
    selection: Selection = Selection()
    required_only: bool = False
    matrix_file: Path | None = None


@dataclass(frozen=True)
class MigrateOptions:
    path: Path
    check_only: bool = False  # change nothing; report whether the file needs migrating
    show_diff: bool = False  # print the change instead of writing it
    license: str | None = None  # added when the old file has none
    version: int | None = None  # added when the old file has none
    sources: bool = False  # also port removed torch APIs (the sources the build compiles, the kernel's Python)


@dataclass(frozen=True)
class AdoptOptions:
    path: Path
    dry_run: bool = False  # plan and show, write nothing
    force: bool = False  # change existing files (their originals are copied aside first)
    name: str | None = None  # the kernel's name (default: derived from the package)
    license: str | None = None  # default: build.toml, the LICENSE file, pyproject.toml
    version: int | None = None  # default: build.toml, else 1
    repo_id: str | None = None  # [general.hub] repo-id, and the repo the written tests load
    record: bool = False  # build the original and record the project's calls into it (adopt/record.py)
    record_timeout: float = 600.0  # seconds one program of the project may run while recorded


@dataclass(frozen=True)
class TestCommandOptions:
    __test__ = False  # not a pytest test class

    path: Path
    selection: Selection = Selection()
    tests: TestOptions = TestOptions()
    build_dir: Path | None = None  # None: PATH/build
    matrix_file: Path | None = None

    @property
    def variants_dir(self) -> Path:
        return self.build_dir or Path(self.path) / "build"


@dataclass(frozen=True)
class BenchOptions:
    warmup: int = 10  # calls of each contender before its samples
    iterations: int = 100  # timed samples of each contender (each sample: enough calls for about 2 ms)
    timeout: float = 1800.0  # one variant's benchmarks, seconds
    repo_id: str | None = None  # LOCAL_KERNELS for benchmarks that call get_kernel themselves

    def __post_init__(self):
        if self.warmup < 0:
            raise UsageError(f"--warmup: {self.warmup} is negative", "give a number of calls, 0 or more")
        if self.iterations < 1:
            raise UsageError(f"--iterations: {self.iterations} gives no timing", "give 1 or more (default 100)")
        if not self.timeout > 0:
            raise UsageError(f"--timeout: {self.timeout} seconds leaves no time", "give seconds, more than 0")


@dataclass(frozen=True)
class BenchCommandOptions:
    path: Path
    selection: Selection = Selection()
    bench: BenchOptions = BenchOptions()
    build_dir: Path | None = None  # None: PATH/build
    matrix_file: Path | None = None

    @property
    def variants_dir(self) -> Path:
        return self.build_dir or Path(self.path) / "build"


# A generated write token: hf_ and 34 letters or digits, the shape of a Hub token.
_TOKEN_ALPHABET = string.ascii_letters + string.digits


@dataclass(frozen=True)
class HubServerOptions:
    data_dir: Path
    port: int = 8080  # 0: any free port
    tokens: tuple[str, ...] = ()  # write tokens
    read_tokens: tuple[str, ...] = ()
    trusted_orgs: tuple[str, ...] = ()  # orgs marked trusted kernel publishers (empty: none, as the Hub marks few)
    generated_token: bool = False  # tokens holds one made up here, for the user to read once
    tokens_without_jobs: tuple[str, ...] = ()  # repository write access, no job.write (the Jobs API refuses them)
    jobs_executor: str = "docker"  # where jobs run: a name of hub_server.jobs.executor.EXECUTORS
    jobs_dir: Path | None = None  # None: <data_dir>/jobs

    def __post_init__(self):
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port: {self.port} is not a TCP port", "give a port from 1 to 65535, or 0 for any free one")
        kinds = (("--token", self.tokens), ("--read-token", self.read_tokens),
                 ("--token-without-jobs", self.tokens_without_jobs))
        for i, (flag, given) in enumerate(kinds):
            for other, more in kinds[i + 1:]:
                both = sorted(set(given) & set(more))
                if both:
                    raise UsageError(f"{flag} and {other} name the same token ({len(both)} of them)",
                                     "give each token one role")

    @classmethod
    def from_args(cls, *, data_dir: Path, port: int, tokens: tuple[str, ...], read_tokens: tuple[str, ...] = (),
                  trusted_orgs: tuple[str, ...] = (), tokens_without_jobs: tuple[str, ...] = (),
                  jobs_executor: str = "docker", jobs_dir: Path | None = None) -> HubServerOptions:
        """Without --token, one write token is generated for this run."""
        jobs = {"tokens_without_jobs": tuple(tokens_without_jobs), "jobs_executor": jobs_executor, "jobs_dir": jobs_dir}
        if tokens:
            return cls(data_dir, port, tuple(tokens), tuple(read_tokens), tuple(trusted_orgs), **jobs)
        token = "hf_" + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(34))
        return cls(data_dir, port, (token,), tuple(read_tokens), tuple(trusted_orgs), generated_token=True, **jobs)


@dataclass(frozen=True)
class BuildCommandOptions:
    path: Path
    selection: Selection = Selection()
    local: bool = False  # only the running torch's variant
    backend: str = "local"
    settings: BackendSettings = BackendSettings()
    jobs: int | None = None  # None: from cores and memory
    cores: int | None = None
    fail_fast: bool = False
    only_failed: bool = False
    force: bool = False
    debug: bool = False
    strict: bool = False
    matrix_file: Path | None = None
    out: Path | None = None  # None: PATH/build
    repo_id: str | None = None  # Hub cache repo (None: [general.hub] repo-id)
    hub_cache: bool = True
    hub_cache_trust: tuple[str, ...] = ()  # --hub-cache-trust: owners or repo ids whose binaries may be reused
    endpoint: str | None = None

    @property
    def build_dir(self) -> Path:
        return (Path(self.out) if self.out else Path(self.path) / "build").resolve()


@dataclass(frozen=True)
class PushOptions:
    path: Path
    repo_id: str | None = None  # REPO_ID as given (None: [general.hub] repo-id)
    selection: Selection = Selection()
    private: bool = False
    dry_run: bool = False
    create_pr: bool = False
    endpoint: str | None = None
    allow_untested: bool = False
    load_only: tuple[str, ...] = ()  # --allow-untested-variant globs
    partial: bool = False
    matrix_file: Path | None = None
    branch: str | None = None  # None: [general.hub] branch, else v<version>
    card: bool = True
    signer: SignerWorkflow | None = None
    allow_api_change: bool = False  # publish a removed or changed public API on the same version (a warning)

    @classmethod
    def from_args(cls, args: tuple[str, ...], *, signer_workflow: str | None = None, **values) -> PushOptions:
        """`publisher push [REPO_ID] [PATH]`: one argument is PATH when it names a folder."""
        if len(args) > 2:
            raise UsageError("too many arguments: expected [REPO_ID] [PATH]")
        if len(args) == 1 and Path(args[0]).is_dir():
            repo_id, path = None, Path(args[0])
        else:
            repo_id, path = (args[0] if args else None), Path(args[1] if len(args) > 1 else ".")
        return cls(path=path, repo_id=repo_id, signer=parse_signer(signer_workflow), **values)


def parse_signer(value: str | None) -> SignerWorkflow | None:
    if not value:
        return None
    try:
        return SignerWorkflow.parse(value)
    except ValueError as err:
        raise UsageError(f"--signer-workflow (or GITHUB_WORKFLOW_REF): {err}",
                         "give the signing workflow as GitHub Actions names it, e.g. "
                         "your-org/your-repo/.github/workflows/release.yml@refs/heads/main") from None


@dataclass(frozen=True)
class ReleaseOptions:
    path: Path
    repo_id: str
    selection: Selection = Selection()
    local: bool = False
    allow_untested: bool = False
    load_only: tuple[str, ...] = ()
    partial: bool = False
    tests: TestOptions = TestOptions()
    matrix_file: Path | None = None
    endpoint: str | None = None
    private: bool = False
    dry_run: bool = False
    hub_cache: bool = True
    test_on: Any = None  # publisher.remote.stage.RemoteTestOptions: test there (--test-on), else here
    build_on: Any = None  # publisher.remote.stage.RemoteTestOptions: build there (--build-on), else here
    max_parallel: int | None = None  # --build-on: jobs running at once (None: all)
    jobs_per: str | None = None  # --build-on: one job per "variant" or "image" (None: the place's default)
    allow_api_change: bool = False

    def test(self) -> TestCommandOptions:
        return TestCommandOptions(path=self.path, selection=self.selection, tests=self.tests,
                                  matrix_file=self.matrix_file)

    def build(self) -> BuildCommandOptions:
        """The build step: the local backend, every other setting at its default."""
        return BuildCommandOptions(path=self.path, selection=self.selection, local=self.local,
                                   matrix_file=self.matrix_file, repo_id=self.repo_id, hub_cache=self.hub_cache,
                                   endpoint=self.endpoint)

    def push(self) -> PushOptions:
        return PushOptions(path=self.path, repo_id=self.repo_id, selection=self.selection, private=self.private,
                           dry_run=self.dry_run, endpoint=self.endpoint, allow_untested=self.allow_untested,
                           load_only=self.load_only, partial=self.partial, matrix_file=self.matrix_file,
                           allow_api_change=self.allow_api_change)


DEFAULT_LICENSE = "Apache-2.0"


@dataclass(frozen=True)
class InitOptions:
    path: Path  # the new project's folder; with --ci, the existing project's
    names: KernelNames | None  # None: --ci (the repo id is read from PATH/build.toml)
    backends: tuple[str, ...] = DEFAULT_BACKENDS
    license: str = DEFAULT_LICENSE
    force: bool = False  # overwrite files the scaffold writes (others are kept)
    workflow: WorkflowRef | None = None  # None: publisher's reusable workflow at this release's tag

    @property
    def ci_only(self) -> bool:
        return self.names is None

    @classmethod
    def from_args(cls, args: tuple[str, ...], *, ci: bool, backends: tuple[str, ...], license: str | None,
                  force: bool, workflow_ref: str | None) -> InitOptions:
        """`publisher init OWNER/NAME [PATH]` or `publisher init --ci [PATH]`."""
        workflow = parse_ref(workflow_ref) if workflow_ref is not None else None
        if ci:
            if backends or license is not None:
                raise UsageError("--backends and --license shape a new project; --ci only adds the release workflow",
                                 "leave them out, or run `publisher init OWNER/NAME` for a new project")
            if len(args) > 1:
                raise UsageError("too many arguments: --ci takes the project folder [PATH]",
                                 "the repo id comes from the project's build.toml ([general.hub] repo-id)")
            path = Path(args[0]) if args else Path(".")
            if args and "/" in args[0] and not path.exists() and names_for_or_none(args[0]):
                raise UsageError(f"--ci takes the project folder, and `{args[0]}` is a repo id, not a folder",
                                 "run it in (or pass) the project folder; its build.toml names the repo "
                                 "([general.hub] repo-id)")
            return cls(path=path, names=None, force=force, workflow=workflow)
        if not args:
            raise UsageError("missing OWNER/NAME: the Hub repository the new kernel is published to",
                             "publisher init my-org/my-kernel [PATH] (or --ci to add the workflow to an existing project)")
        if len(args) > 2:
            raise UsageError("too many arguments: expected OWNER/NAME [PATH]")
        names = names_for(args[0])
        path = Path(args[1]) if len(args) > 1 else Path(names.repo_name)
        return cls(path=path, names=names, backends=parse_backends(backends), license=parse_license(license),
                   force=force, workflow=workflow)


def names_for_or_none(text: str) -> KernelNames | None:
    try:
        return names_for(text)
    except UsageError:
        return None


def parse_backends(values: tuple[str, ...]) -> tuple[str, ...]:
    """--backends cpu,cuda (repeatable; `all`: every backend with a template), in build.toml's order."""
    if not values:
        return DEFAULT_BACKENDS
    chosen: set[str] = set()
    for item in (part.strip().lower() for value in values for part in value.split(",")):
        if item == "all":
            chosen.update(OFFERED_BACKENDS)
        elif item in OFFERED_BACKENDS:
            chosen.add(item)
        elif item in BACKENDS:
            raise UsageError(f"--backends: publisher init has no {item} kernel template; it offers "
                             f"{', '.join(OFFERED_BACKENDS)}",
                             f"scaffold with those, then add a [kernel.<name>] table with backend = \"{item}\" and "
                             "its sources to build.toml yourself")
        else:
            close = suggest(item, OFFERED_BACKENDS) if item else None
            raise UsageError(f"--backends: unknown backend `{item}`" if item else "--backends: an empty backend name",
                             (f"did you mean `{close}`? " if close else "") + f"publisher init offers "
                             f"{', '.join(OFFERED_BACKENDS)} (comma-separated, or `all`)")
    return tuple(b for b in BACKENDS if b in chosen)


def parse_license(value: str | None) -> str:
    if value is None:
        return DEFAULT_LICENSE
    if not value.strip():
        raise UsageError("--license is empty", f"give a license identifier, e.g. {DEFAULT_LICENSE} or mit")
    if any(c in value for c in '"\\\n\r') or not value.isprintable():
        raise UsageError(f"--license `{value!r}` is not a license identifier", f"e.g. {DEFAULT_LICENSE} or mit")
    problem = license_problem(value)
    if problem:
        raise UsageError(f"--license: {problem[0]}", problem[1])
    return value.strip()
