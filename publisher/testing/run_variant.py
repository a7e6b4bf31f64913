"""Run one variant's tests in a subprocess, from a temporary folder outside
the source tree, where only that variant is visible to `kernels`:

<tmp>/<name>-torch-ext/<variant> -> the variant. As in kernel-builder's test shell, where the
                                  extension's Nix output has this name: LOCAL_KERNELS=<repo-id>=
                                  <tmp>/<name>-torch-ext, and the variant folder is on PYTHONPATH
<tmp>/import/<python_name>    -> the variant (for tests that `import <name>`; first on PYTHONPATH)
<tmp>/tests/                  copy of the project's tests/, or the default smoke test
<tmp>/conftest.py             publisher's plugin (marker, device fixture, event log)
<tmp>/publisher_device.py     device.py, for the plugin
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from publisher import runner, state
from publisher.options import TestOptions
from publisher.plan.variants import Variant
from publisher.testing import protocol, report
from publisher.testing.environment import TestEnvironment
from publisher.testing.report import VariantTestResult
from publisher.testing.test_depends import implicit_requirement

HERE = Path(__file__).parent
PROBE_TIMEOUT = 180
_GET_KERNEL_RE = re.compile(r"""get_kernel\(\s*["']([\w.-]+/[\w.-]+)["']""")
_DEVICE_RE = re.compile(rf"^{protocol.DEVICE_LINE} (\{{.*\}})$", re.M)
_MISSING_MODULE_RE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


@dataclass(frozen=True)
class VariantUnderTest:
    name: str
    path: Path  # build/<variant>
    python_name: str
    tests_dir: Path | None  # the project's tests/, None = default smoke test
    extension: str  # Project.extension_name: the folder LOCAL_KERNELS names

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
    (tmp / "pytest.ini").write_text(
        f"[pytest]\ntimeout = {int(options.test_timeout)}\ntimeout_method = thread\n"
    )
    if target.tests_dir is not None:
        shutil.copytree(target.tests_dir, tmp / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        _use_default_test(tmp)


def _use_default_test(tmp: Path) -> None:
    shutil.rmtree(tmp / "tests", ignore_errors=True)
    (tmp / "tests").mkdir()
    shutil.copyfile(HERE / "default_test.py", tmp / "tests" / "test_publisher_smoke.py")


def _probe(env: TestEnvironment, child_env: dict, cwd: Path, log: Path) -> tuple[dict | None, str]:
    result = runner.run(
        [env.python, str(HERE / "device.py")], cwd=cwd, env=child_env, log=log, timeout=PROBE_TIMEOUT
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
    argv = [env.python, "-m", "pytest", "tests", "-p", "no:cacheprovider", "--rootdir", str(tmp),
            "-c", str(tmp / "pytest.ini"), "-rfE", "--tb=short", "--disable-warnings", "-q"]
    if target.tests_dir is not None and not load_only and not all_tests and _uses_ci_marker(tmp / "tests"):
        argv += ["-m", "kernels_ci"]
    return argv


def _failure_reason(result: runner.RunResult, events: report.EventSummary, options: TestOptions) -> str:
    where = f" in {events.unfinished}" if events.unfinished else ""
    if result.timed_out:
        return f"timed out after {int(options.timeout)}s{where} (--timeout)"
    if result.returncode < 0:
        try:
            name = signal.Signals(-result.returncode).name
        except ValueError:
            name = f"signal {-result.returncode}"
        return f"crashed ({name}){where}"
    if events.unfinished and "Timeout" in result.output:
        return f"test timed out after {int(options.test_timeout)}s{where} (--test-timeout)"
    if events.unfinished:
        return f"the test process exited (code {result.returncode}){where}"
    if result.returncode == 2 and events.counts.errors:
        missing = sorted(set(_MISSING_MODULE_RE.findall(result.output)))
        if missing:
            names = ", ".join(f"`{m}`" for m in missing)
            return (f"tests could not be collected: module {names} is missing ({', '.join(events.failing[:3])}); "
                    "declare what the tests need in flake.nix `pythonCheckInputs = pkgs: with pkgs; [ ... ];` "
                    "and publisher installs it into the test environments")
        return "tests could not be collected (import error?): " + ", ".join(events.failing[:3])
    failing = ", ".join(events.failing[:3]) + (" ..." if len(events.failing) > 3 else "")
    return f"{events.counts.failed + events.counts.errors} test(s) failed: {failing}" if failing else result.first_error_line()


def _environment_lacks(result: runner.RunResult, events: report.EventSummary) -> dict[str, str]:
    """module -> requirement, when the tests could not even be collected and every module they
    missed is one kernel-builder's test shells hold undeclared (empty otherwise)."""
    collecting = (result.returncode == 2 and events.counts.errors) or result.returncode in (3, 4)
    missing = sorted(set(_MISSING_MODULE_RE.findall(result.output))) if collecting and not events.unfinished else []
    provided = {m: implicit_requirement(m) for m in missing}
    return provided if missing and all(provided.values()) else {}


_TEST_FUNCTION = re.compile(r"^\s*(?:async\s+)?def\s+test|^\s*class\s+Test", re.M)


def _untested_reason(events: report.EventSummary, tests: Path) -> str:
    skipped = events.counts.skipped
    if not skipped:
        files = sorted(tests.rglob("*.py"))
        if not any(_TEST_FUNCTION.search(p.read_text(errors="replace")) for p in files):
            return (f"no test ran: tests/ ({len(files)} Python file(s)) defines no pytest test, no `def test_...` "
                    "function or `Test...` class (scripts run as `python tests/...` are not run: kernel-builder's "
                    "CI and publisher run `pytest tests`)")
        return "no test ran (none collected, or all deselected)"
    why = f" (e.g. {events.skip_reasons[0]})" if events.skip_reasons else ""
    return f"all {skipped} test(s) skipped{why}"


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
        child_env = dict(os.environ)
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
        load_only, probed = False, None
        if accelerator is not None:
            # Whether the tests can run here decides what runs: ask the environment first.
            probed, probe_output = _probe(env, child_env, tmp, log)
            if probed is None:
                return result("error", on_hardware=False, output_tail=report.tail(probe_output),
                              reason=f"torch does not start in {env.python} ({env.origin})")
            load_only = not probed["accelerators"].get(accelerator, False)
        if load_only:
            child_env[protocol.LOAD_ONLY] = "1"
            _use_default_test(tmp)  # the project's tests need the hardware
        child_env[protocol.DEVICE_OUT] = str(tmp / "device.json")
        argv = _pytest_argv(env, tmp, target, load_only, options.all_tests)
        run = runner.run(argv, cwd=tmp, env=child_env, log=log, on_line=on_line, timeout=options.timeout)
        events = report.read_events(tmp / "events.jsonl")
        device = _read_json(tmp / "device.json") or probed or {}
        common = dict(device=device, tests=events.counts, output_tail=report.tail(run.output))
        if run.ok and load_only:
            return result("loaded-not-run", on_hardware=False,
                          reason=f"no {accelerator.upper()} device here: imported and op registration checked, tests not run", **common)
        if (run.ok or run.returncode == 5) and not events.counts.passed:
            # Nothing ran: all skipped, or none collected. Not a pass, whatever pytest's exit code.
            return result("untested", on_hardware=False, reason=_untested_reason(events, tmp / "tests"), **common)
        if run.ok:
            return result("passed", on_hardware=True, **common)
        lacking = _environment_lacks(run, events)
        if lacking:
            # kernel-builder's test shells hold these undeclared: the environment is short, not the kernel
            return result("error", on_hardware=False, reason=(
                f"the tests import {', '.join(f'`{m}`' for m in lacking)}, which {env.origin} lacks; kernel-builder's "
                "test environments have it without a declaration (their torch depends on it): "
                f"{env.python} -m pip install {' '.join(sorted(set(lacking.values())))}"), **common)
        if run.returncode in (3, 4) and not events.unfinished:
            return result("error", on_hardware=False, reason=f"pytest could not run (exit {run.returncode}): {run.first_error_line()}", **common)
        return result("failed", on_hardware=not load_only, reason=_failure_reason(run, events, options), **common)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
