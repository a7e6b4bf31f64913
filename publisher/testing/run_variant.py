"""Run one variant's tests in a subprocess, from a temporary folder outside
the source tree, where only that variant is visible to `kernels`:

<tmp>/<name>-torch-ext/<variant> -> the variant. As in kernel-builder's test shell, where the
                                  extension's Nix output has this name: LOCAL_KERNELS=<repo-id>=
                                  <tmp>/<name>-torch-ext, and PYTHONPATH lists the variant folder
<tmp>/import/<python_name>    -> the variant (for tests that `import <name>`; first on PYTHONPATH)

The variant folder is the package itself (flat), so it is never on an interpreter's path (the
variable lists it for conftest.py files that look for the build there; testing/start.py keeps it
off sys.path): a module of the kernel (typing.py, types.py, io.py, a subpackage named `kernels`)
is importable only as `<python_name>.<module>`, never in place of a standard-library or installed
module, in the tests, the device probe and the smoke test alike.
<tmp>/tests/                  copy of the project's tests/, or the default smoke test
<tmp>/conftest.py             publisher's plugin (marker, device fixture, event log)
<tmp>/publisher_device.py     device.py, for the plugin
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from publisher import runner, state
from publisher.host import host_platform
from publisher.options import TestOptions
from publisher.plan.variants import Variant
from publisher.testing import protocol, report, verdict
from publisher.testing.accelerators import hiding_for
from publisher.testing.environment import TestEnvironment
from publisher.testing.report import VariantTestResult
from publisher.testing.smoke import read_smoke
from publisher.testing.start import pytest_command
from publisher.testing.test_depends import declared_test_depends, provided_modules

HERE = Path(__file__).parent
PROBE_TIMEOUT = 180
SMOKE_CALL_SECONDS = 60.0  # one smoke call on guessed inputs; longer counts as not returning
MAX_SMOKE_RERUNS = 8  # smoke runs started again without a call that did not return
_GET_KERNEL_RE = re.compile(r"""get_kernel\(\s*["']([\w.-]+/[\w.-]+)["']""")
_DEVICE_RE = re.compile(rf"^{protocol.DEVICE_LINE} (\{{.*\}})$", re.M)


@dataclass(frozen=True)
class VariantUnderTest:
    name: str
    path: Path  # build/<variant>
    python_name: str
    tests_dir: Path | None  # the project's tests/, None = default smoke test
    extension: str  # Project.extension_name: the folder LOCAL_KERNELS names
    # op -> the arguments the package's own code gives it (callers.py), for the smoke test
    package_inputs: Mapping[str, dict] = field(default_factory=dict)

    def kernel_dir(self, tmp: Path) -> Path:
        return tmp / self.extension


def needs_accelerator(variant: Variant) -> str | None:
    """The accelerator a variant needs to run, None when a CPU is enough."""
    backend = variant.backend
    return None if backend in ("cpu", "universal") else backend


def find_repo_id(tests_dir: Path | None) -> str | None:
    """The repo id the project's tests load with get_kernel, when they name exactly one."""
    if tests_dir is None:
        return None
    found = {m for p in tests_dir.rglob("*.py") for m in _GET_KERNEL_RE.findall(p.read_text(errors="replace"))}
    return found.pop() if len(found) == 1 else None


def _uses_ci_marker(tests_dir: Path) -> bool:
    return any("kernels_ci" in p.read_text(errors="replace") for p in tests_dir.rglob("*.py"))


def _prepare(tmp: Path, target: VariantUnderTest, options: TestOptions) -> None:
    target.kernel_dir(tmp).mkdir()
    (target.kernel_dir(tmp) / target.name).symlink_to(target.path.resolve(), target_is_directory=True)
    (tmp / "import").mkdir()
    (tmp / "import" / target.python_name).symlink_to(target.path.resolve(), target_is_directory=True)
    shutil.copyfile(HERE / "plugin.py", tmp / "conftest.py")
    shutil.copyfile(HERE / "device.py", tmp / "publisher_device.py")
    # Anchors pytest's rootdir here, so no config of the caller's tree applies. The
    # timeout keys take effect when pytest-timeout is installed; its thread method
    # also stops a test stuck in native code (a signal would wait for it forever).
    # The smoke test bounds each of its calls itself (a call that does not return is "not exercised"), so the
    # per-test timeout, which would end the whole smoke test as a failure, is off for it.
    per_test = int(options.test_timeout) if target.tests_dir is not None else 0
    (tmp / "pytest.ini").write_text(f"[pytest]\ntimeout = {per_test}\ntimeout_method = thread\n")
    if target.tests_dir is not None:
        shutil.copytree(target.tests_dir, tmp / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        _use_default_test(tmp)


def _use_default_test(tmp: Path) -> None:
    shutil.rmtree(tmp / "tests", ignore_errors=True)
    (tmp / "tests").mkdir()
    shutil.copyfile(HERE / "default_test.py", tmp / "tests" / "test_publisher_smoke.py")


def _probe(env: TestEnvironment, child_env: dict, cwd: Path, log: Path) -> tuple[dict | None, str]:
    # the copy in the run folder: the script's folder is first on its path, and that one holds only the harness
    result = runner.run(
        [env.python, str(cwd / "publisher_device.py")], cwd=cwd, env=child_env, log=log, timeout=PROBE_TIMEOUT
    )
    match = _DEVICE_RE.search(result.output)
    if not result.ok or match is None:
        return None, result.output
    return json.loads(match.group(1)), result.output


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _pytest_argv(env: TestEnvironment, tmp: Path, target: VariantUnderTest, load_only: bool, all_tests: bool) -> list[str]:
    start = pytest_command(env.python, str(target.kernel_dir(tmp) / target.name), env.overlay)
    argv = [*start, "tests", "-p", "no:cacheprovider", "--rootdir", str(tmp),
            "-c", str(tmp / "pytest.ini"), "-rfE", "--tb=short", "--disable-warnings", "-q"]
    if target.tests_dir is not None and not load_only:
        # a module that cannot be collected is reported on its own line; the others still run
        argv.append("--continue-on-collection-errors")
        if not all_tests and _uses_ci_marker(tmp / "tests"):
            argv += ["-m", "kernels_ci"]
    return argv


def _run_tests(argv: list[str], tmp: Path, child_env: dict, log: Path, on_line, options: TestOptions,
               smoke_log: Path | None) -> tuple[runner.RunResult, report.EventSummary]:
    """Run pytest; for the smoke test, again without each call that did not return (it ends
    the process after recording it, since spinning native code cannot be interrupted)."""
    deadline = time.monotonic() + options.timeout
    skip: list[str] = []
    while True:
        (tmp / "events.jsonl").unlink(missing_ok=True)
        run = runner.run(argv, cwd=tmp, env=child_env, log=log, on_line=on_line,
                         timeout=max(1.0, deadline - time.monotonic()))
        events = report.read_events(tmp / "events.jsonl")
        if smoke_log is None or run.returncode != protocol.SMOKE_HUNG_EXIT or len(skip) >= MAX_SMOKE_RERUNS:
            return run, events
        hung = [t for t in read_smoke(smoke_log).hung() if t not in skip]
        if not hung:
            return run, events
        skip += hung
        child_env[protocol.SMOKE_SKIP] = json.dumps(skip)


def _kernel(target: VariantUnderTest, tmp: Path) -> verdict.Kernel:
    """The kernel's own module names and the folders its files load from (a frame there is the kernel's)."""
    try:
        ops_id = json.loads((target.path / "metadata.json").read_text()).get("id") or ""
    except (OSError, ValueError, AttributeError):
        ops_id = ""
    names = frozenset(n for n in (target.python_name, str(ops_id), target.name) if n)
    paths = (str(target.path.resolve()), str(tmp / "import"), str(target.kernel_dir(tmp)))
    return verdict.Kernel(names, paths)


def _environment(env: TestEnvironment, target: VariantUnderTest, hidden: tuple[str, ...]) -> verdict.Environment:
    project_root = target.tests_dir.parent if target.tests_dir is not None else None
    declared = frozenset(provided_modules(declared_test_depends(project_root)))
    return verdict.Environment(env.python, env.origin, declared, hidden)


def run_variant(
    target: VariantUnderTest,
    env: TestEnvironment,
    build_dir: Path,
    options: TestOptions,
    on_line: Callable[[str], None] | None = None,
) -> VariantTestResult:
    """Test one variant. Never raises for what the variant does (crash, hang,
    failure): those come back as a result."""
    started = time.monotonic()
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    variant = Variant.parse(target.name)
    fingerprint = state.variant_fingerprint(target.path)
    log = state.logs_dir(build_dir).resolve() / f"{target.name}.test.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# publisher test {target.name} with {env.python} ({env.origin})\n")

    def result(status: str, **kw) -> VariantTestResult:
        return VariantTestResult(
            variant=target.name, status=status, fingerprint=fingerprint, time=stamp, log=str(log),
            seconds=time.monotonic() - started, **kw,
        )

    tmp = Path(tempfile.mkdtemp(prefix=f"publisher-test-{target.name}-"))
    try:
        _prepare(tmp, target, options)
        repo_id = options.repo_id or find_repo_id(target.tests_dir)
        # the caller's environment, less any protocol name it happens to hold (only this run sets those)
        child_env = {k: v for k, v in os.environ.items() if k not in protocol.NAMES}
        child_env.update(
            PYTHONDONTWRITEBYTECODE="1",  # keep __pycache__ out of the variant folder
            PYTHONPATH=os.pathsep.join([str(tmp / "import"), str(target.kernel_dir(tmp) / target.name)]
                                       + ([child_env["PYTHONPATH"]] if child_env.get("PYTHONPATH") else [])),
        )
        child_env.update({
            protocol.EVENTS: str(tmp / "events.jsonl"),
            protocol.BACKEND: variant.backend,
            protocol.KERNEL_DIR: str(target.kernel_dir(tmp)),
            protocol.VARIANT_DIR: str(target.kernel_dir(tmp) / target.name),
        })
        if repo_id:
            child_env["LOCAL_KERNELS"] = f"{repo_id}={target.kernel_dir(tmp)}"

        accelerator = needs_accelerator(variant)
        hiding = hiding_for(variant, host_platform())
        if hiding is not None:
            # tested as a user without an accelerator runs it: tests that pick a device by availability pick the CPU
            child_env.update(hiding.env)
            child_env[protocol.HIDDEN] = json.dumps({"accelerators": hiding.hidden, "torch": hiding.torch_checks})
        load_only, probed = False, None
        if accelerator is not None:
            # Whether the tests can run here decides what runs: ask the environment first.
            # the probe needs nothing of the variant: its folder is not on the probe's path at all
            probe_env = dict(child_env, PYTHONPATH=os.pathsep.join(
                p for p in child_env["PYTHONPATH"].split(os.pathsep) if p != str(target.kernel_dir(tmp) / target.name)))
            probed, probe_output = _probe(env, probe_env, tmp, log)
            if probed is None:
                return result("error", on_hardware=False, output_tail=report.tail(probe_output),
                              reason=f"torch does not start in {env.python} ({env.origin})",
                              fix=f"check that `{env.python} -c 'import torch'` works")
            load_only = not probed["accelerators"].get(accelerator, False)
        if load_only:
            child_env[protocol.LOAD_ONLY] = "1"
            _use_default_test(tmp)  # the project's tests need the hardware
        suite = verdict.LOAD_CHECK if load_only else verdict.PROJECT if target.tests_dir is not None else verdict.SMOKE
        child_env[protocol.DEVICE_OUT] = str(tmp / "device.json")
        argv = _pytest_argv(env, tmp, target, load_only, options.all_tests)
        smoke_log = tmp / "smoke.jsonl"
        if suite != verdict.PROJECT:
            child_env[protocol.SMOKE_OUT] = str(smoke_log)
            child_env[protocol.SMOKE_CALL_TIMEOUT] = str(min(SMOKE_CALL_SECONDS, options.test_timeout / 2))
            if target.package_inputs:
                (tmp / "smoke-inputs.json").write_text(json.dumps(target.package_inputs))
                child_env[protocol.SMOKE_INPUTS] = str(tmp / "smoke-inputs.json")
        run, events = _run_tests(argv, tmp, child_env, log, on_line, options, smoke_log if suite == verdict.SMOKE else None)
        smoke = read_smoke(smoke_log) if suite == verdict.SMOKE else None
        device = _read_json(tmp / "device.json") or probed or {}
        outcome = verdict.judge(run, events, suite=suite, accelerator=accelerator, tests=tmp / "tests",
                                kernel=_kernel(target, tmp), env=_environment(env, target, hiding.hidden if hiding else ()),
                                options=options,
                                smoke=smoke)
        return result(outcome.status, on_hardware=outcome.on_hardware, reason=outcome.reason, fix=outcome.fix,
                      suite=outcome.suite or suite, checks=outcome.checks, modules=outcome.modules, device=device,
                      recorded_from=outcome.recorded_from,
                      tests=events.counts,
                      output_tail=report.tail(run.output),
                      smoke=tuple(c.entry() for c in smoke.calls) if smoke else (),
                      warnings=(smoke.warnings if smoke else ()) + outcome.warnings)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
