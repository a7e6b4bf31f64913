"""What one finished test run says about the variant, in one place. Four
verdicts, kept apart:

- `failed`: the kernel is wrong. Its tests ran and failed, or crashed or hung
  in them; or, with no tests of its own, the smoke test found it certainly
  broken (does not load through `kernels`, registers no op).
- `error`: the run says nothing about the kernel: the test environment lacks
  a module the tests import, the tests do not compile, a fixture nothing
  provides, pytest could not start. Always with the fix.
- `untested`: nothing ran (all skipped, none collected), or the smoke test
  could exercise nothing, or a smoke call killed the process or the device
  (its inputs are publisher's, derived or guessed: a kernel that trusts its
  inputs may do that on ones it was never meant to get), or an op of adopt's generated tests refused the
  inputs they gave it ("needs inputs": inputs adopt derived or guessed are a
  reconstruction, and an op raising on them says they do not fit, not that
  it computes wrongly); with the line of INPUTS to edit. Likewise an op the
  kernel has no kernel for on its inputs' device ("not registered": never
  called), which names the registration to fix.
- `passed`: the tests ran on the variant's hardware and passed (and what the
  smoke test exercised, when it was only that; "ops run only" when the
  passing tests are adopt's generated ones and none compared an op with a
  reference).
(`loaded-not-run`: the hardware is missing here; the import was checked.)"""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass
from pathlib import Path

from publisher.options import TestOptions
from publisher.project.resources import general_python_depends
from publisher.runner import RunResult
from publisher.testing import protocol
from publisher.testing.accelerators import asked_for_hidden
from publisher.testing.report import OPS_RUN, EventSummary
from publisher.testing.smoke import FATAL, SmokeLog, describe_call
from publisher.testing.test_depends import DECLARE_HINT, implicit_requirement, pypi_name

# What ran: the project's own tests, publisher's smoke test (a project without tests/),
# or its load check (the variant's hardware is missing here).
PROJECT, SMOKE, LOAD_CHECK = "project", "smoke", "load-check"
_MISSING_MODULE_RE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_TEST_FUNCTION = re.compile(r"^\s*(?:async\s+)?def\s+test|^\s*class\s+Test", re.M)
_NOT_COMPILING = ("SyntaxError", "IndentationError", "TabError")


@dataclass(frozen=True)
class Outcome:
    status: str
    reason: str = ""
    fix: str = ""
    on_hardware: bool = False
    suite: str = ""  # what the verdict rests on, when not what ran (ops-run: only adopt's generated tests)
    checks: tuple[tuple[str, int], ...] = ()  # ops-run: (("ran", n), ("reference", m)); (("needs-inputs", k),)
    modules: tuple[dict, ...] = ()  # test modules that could not be collected: {module, status, reason, fix} each
    warnings: tuple[str, ...] = ()  # what the verdict does not rest on (tests that could not test this variant)
    recorded_from: tuple[str, ...] = ()  # replayed calls: the project's programs they were recorded from


@dataclass(frozen=True)
class Kernel:
    """What is the kernel's own code: its top-level module names and the folders its files are read from."""

    names: frozenset[str]
    paths: tuple[str, ...]

    def owns(self, file: str | None) -> bool:
        return bool(file) and any(str(file).startswith(p.rstrip("/") + "/") for p in self.paths)

    def loading(self, files: list[str]) -> bool:
        """Whether a traceback's frames run the kernel's top-level `__init__.py`: importing the kernel itself
        (what `get_kernel` does) had not finished."""
        roots = {p.rstrip("/") for p in self.paths}  # the variant folder is the package, or holds it
        return any(self.owns(f) and Path(f).name == "__init__.py"
                   and (str(Path(f).parent) in roots or str(Path(f).parent.parent) in roots) for f in files)


@dataclass(frozen=True)
class Environment:
    """Where the tests ran: to say how to fix what it lacks. Declared test dependencies are installed for every
    run (into an environment publisher made, or its overlay for the user's interpreter)."""

    python: str
    origin: str
    declared: frozenset[str]  # top-level modules the project declares for its tests
    hidden: tuple[str, ...] = ()  # accelerators hidden from the tests (a cpu variant's: "CUDA", ...)


@dataclass(frozen=True)
class _Lack:
    """One failing test that says nothing about the kernel."""

    nodeid: str
    what: str  # a sentence
    module: str | None = None  # a missing module's top-level name
    fix: str = ""  # for what is not a missing module
    in_kernel: str = ""  # the kernel's own file that imports the missing module (not one loading the kernel imports)
    hidden: str = ""  # the hidden accelerator the test asked for (it cannot test a cpu variant)


def _blame_environment(exception: dict, kernel: Kernel, env: Environment) -> _Lack | None:
    """The environment problem a failing test's exception shows, or None when it is the kernel's (or its test's) word."""
    kind, file = exception.get("type"), exception.get("file")
    node = str(exception.get("nodeid") or "")
    device = asked_for_hidden(str(exception.get("message") or ""), env.hidden) if env.hidden else None
    if device:
        return _Lack(node, f"{_tests_path(node)} asks for {device}, which a cpu variant's tests do not see (its users "
                           f"have none): {exception.get('message')}", hidden=device)
    if kind in ("ModuleNotFoundError", "ImportError"):
        module = exception.get("module") or next(iter(_MISSING_MODULE_RE.findall(str(exception.get("message")))), None)
        top = str(module).split(".")[0] if module else None
        if top is None or top in kernel.names:
            return None  # the kernel's own package lacks something: users meet it too
        if kernel.owns(file):
            if kind != "ModuleNotFoundError" or "." in str(module) or kernel.loading(exception.get("files") or [file]):
                # loading the kernel fails (users meet it too), or its code asks an installed package for
                # something that package does not have (torch._six): the kernel's code is wrong there
                return None
            # a module of the kernel's package beyond what loading the kernel imports needs a package this
            # environment lacks: the kernel loads; its tests that import that module could not run
            inside = _kernel_file(str(file), kernel)
            return _Lack(node, f"module `{module}` is not installed (the kernel's {inside} imports it)", top,
                         in_kernel=inside)
        what = (f"cannot import name from `{module}` ({exception.get('message')})" if kind == "ImportError"
                else f"module `{module}` is not installed")
        return _Lack(node, what, top)
    if kind in _NOT_COMPILING and not kernel.owns(file):
        where = f"{_tests_path(str(file))}:{exception.get('line')}"
        return _Lack(node, f"the tests do not compile: {where}: {exception.get('message')}",
                     fix=f"fix the {str(kind).replace('Error', ' error').lower()} at {where}")
    if kind == "FixtureLookupError":
        return _Lack(node, f"a test asks for a fixture nothing provides ({exception.get('message')})",
                     fix="define the fixture in tests/conftest.py (publisher's harness provides only `device`)")
    if "::" not in node and not any(kernel.owns(f) for f in exception.get("files") or [file]):
        # A test module that cannot be imported, and the kernel's code is nowhere in what raised: code the tests
        # import (the project's other Python, a library) does not run here. No test ran, so nothing is judged.
        where = f"{file}:{exception.get('line')}" if file else "importing it"
        return _Lack(node, f"{_tests_path(node)} could not be collected: {kind}: {exception.get('message')} "
                           f"(raised in {where}, not in the kernel's code)",
                     fix=f"make what {_tests_path(node)} imports run with the torch of the variant, or leave it out of "
                         "tests/ (the kernel was not judged by it)")
    return None


def _tests_path(file: str) -> str:
    """A file of the copied tests/ as the author knows it (tests/...)."""
    parts = Path(file).parts
    return "/".join(parts[parts.index("tests"):]) if "tests" in parts else Path(file).name


def _lacks(events: EventSummary, kernel: Kernel, env: Environment) -> tuple[list[_Lack], bool]:
    """The environment problems among the failing tests, and whether every failing test is one."""
    by_node: dict[str, dict] = {}
    for exception in events.exceptions:
        by_node.setdefault(str(exception.get("nodeid") or ""), exception)
    lacks, all_environment = [], bool(events.failing)
    for node in dict.fromkeys(events.failing):
        exception = by_node.get(node)
        lack = _blame_environment(exception, kernel, env) if exception else None
        if lack is None:
            all_environment = False
        else:
            lacks.append(lack)
    return lacks, all_environment


def _kernel_file(file: str, kernel: Kernel) -> str:
    """A file of the kernel as its package names it (pkg/sub/mod.py)."""
    parts = Path(file).parts
    for i, part in enumerate(parts):
        if part in kernel.names:
            return "/".join(parts[i:])
    return Path(file).name


def _fix(lacks: list[_Lack], env: Environment) -> str:
    mine = list(dict.fromkeys(lack.module for lack in lacks if lack.module and lack.in_kernel))
    rest = [lack for lack in lacks if not (lack.module in mine and lack.in_kernel)]
    if mine:
        curated = {str(v.get("import")): k for k, v in general_python_depends().items() if v.get("import")}
        declare = [m for m in mine if m in curated]
        other = [m for m in mine if m not in declare]
        said = []
        if declare:
            said.append(f"declare {', '.join(f'`{curated[m]}`' for m in declare)} in build.toml `[general] "
                        "python-depends` (the kernel's own code imports it)")
        if other:
            said.append(f"{', '.join(f'`{m}`' for m in other)}: imported by the kernel's own modules, and not a "
                        "dependency a Hub kernel can declare (python-depends takes only the curated packages): keep "
                        "those modules out of the kernel's package, or import it inside the functions that use it")
        said.append(f"to run those tests here: {env.python} -m pip install "
                    + " ".join(implicit_requirement(m) or pypi_name(m) for m in mine))
        return "; ".join(said + ([_fix(rest, env)] if rest else []))
    modules = list(dict.fromkeys(lack.module for lack in lacks if lack.module))
    if not modules:
        return "; ".join(dict.fromkeys(lack.fix for lack in lacks if lack.fix)) or "run `pytest tests` to see why"
    requirements = [implicit_requirement(m) or pypi_name(m) for m in modules]
    if all(implicit_requirement(m) for m in modules):
        # kernel-builder's test shells hold these undeclared (their torch depends on them)
        return f"{env.python} -m pip install {' '.join(requirements)}"
    declared = [m for m in modules if m in env.declared]
    if declared:
        return (f"`{'`, `'.join(declared)}` is declared but did not install as that module: check the requirement's "
                "project name on PyPI")
    # declared test dependencies are installed for every run (testing.overlay): declaring is the fix
    return DECLARE_HINT.format(req=requirements[0])


def _lack_reason(lacks: list[_Lack], env: Environment, passed: int = 0) -> str:
    shown = "; ".join(dict.fromkeys(lack.what for lack in lacks[:3]))
    modules = [lack.module for lack in lacks if lack.module]
    judged = (f"the other {passed} test(s) passed" if passed else "nothing of the kernel was judged")
    if modules and all(implicit_requirement(m) for m in modules):
        return (f"the tests import {', '.join(f'`{m}`' for m in dict.fromkeys(modules))}, which {env.origin} lacks; "
                "kernel-builder's test environments have it without a declaration (their torch depends on it)"
                + (f"; {judged}" if passed else ""))
    nodes = ", ".join(dict.fromkeys(lack.nodeid for lack in lacks[:3]))
    loads = "; importing the kernel is not what failed" if any(lack.in_kernel for lack in lacks) else ""
    return f"the tests could not run in {env.origin}: {shown} ({nodes}){loads}; {judged}"


def _module_lines(lacks: list[_Lack], env: Environment) -> tuple[dict, ...]:
    """One report line for each test module that could not be collected (pytest went on with the others):
    what it needs and the fix, as for a variant."""
    return tuple({"module": _tests_path(lack.nodeid), "status": "error", "reason": lack.what,
                  "fix": _fix([lack], env)} for lack in lacks if "::" not in lack.nodeid)


def judge(run: RunResult, events: EventSummary, *, suite: str, accelerator: str | None, kernel: Kernel,
          env: Environment, tests: Path, options: TestOptions, smoke: SmokeLog | None = None) -> Outcome:
    """The verdict of one finished pytest run of a variant."""
    if run.ok and suite == LOAD_CHECK:
        return Outcome("loaded-not-run", f"no {str(accelerator).upper()} device here: imported and op registration "
                                         "checked, tests not run")
    if (run.ok or run.returncode == 5) and (events.needs_inputs or events.not_registered):
        return _not_judged(events.needs_inputs, events.not_registered)
    nothing_ran = (run.ok or run.returncode == 5) and not events.counts.passed
    if nothing_ran:
        return Outcome("untested", _untested_reason(events, tests))
    if run.ok and suite == SMOKE and smoke is not None and not smoke.exercised:
        return Outcome("untested", "no tests of its own, and the smoke test could call none of the kernel's ops or "
                                   "functions on inputs it can build: " + _not_exercised(smoke),
                       fix="add tests/ that call the kernel's ops and compare them with a reference")
    if run.ok:
        return Outcome("passed", on_hardware=True, **_rests_on(events))
    if suite in (SMOKE, LOAD_CHECK):
        return _smoke_verdict(run, events, smoke, options)
    lacks, all_environment = _lacks(events, kernel, env)
    modules = _module_lines(lacks, env)
    if lacks and all_environment and all(lack.hidden for lack in lacks) and not events.unfinished \
            and not run.timed_out:
        return _asked_for_hidden(lacks, events)
    if lacks and all_environment and not events.unfinished and not run.timed_out:
        # the worst of the modules: those that ran and passed are counted, the verdict is the others' error
        return Outcome("error", _lack_reason(lacks, env, events.counts.passed), _fix(lacks, env), modules=modules)
    if run.returncode in (3, 4) and not events.unfinished:
        missing = sorted({m.split(".")[0] for m in _MISSING_MODULE_RE.findall(run.output)} - kernel.names)
        if missing:
            fake = [_Lack("conftest.py", f"module `{m}` is not installed", m) for m in missing]
            return Outcome("error", _lack_reason(fake, env), _fix(fake, env))
        return Outcome("error", f"pytest could not run (exit {run.returncode}): {run.first_error_line()}",
                       fix="run `pytest tests` in the project to see why it does not start")
    known = _original_failures(tests)
    if known and not lacks:
        same = _as_with_the_original(run, events, known)
        if same is not None:
            return same
    reason = _failure_reason(run, events, options, frozenset(lack.nodeid for lack in lacks))
    if events.flaky_unretried:
        reason += (f"; {len(events.flaky_unretried)} of them marked @pytest.mark.flaky, which nothing here runs again "
                   "(declare the `flaky` or `pytest-rerunfailures` plugin as a test dependency to honour it)")
    if lacks:
        reason += f"; besides, {len(lacks)} test(s) could not run: {lacks[0].what}"
    return Outcome("failed", reason, on_hardware=True, modules=modules)


def _original_failures(tests: Path) -> dict[str, str]:
    """The project's tests that failed or crashed with its original extension where `adopt --record` ran them
    (tests/recorded/*.json): {node id: failed|crashed}."""
    found: dict[str, str] = {}
    folder = Path(tests) / protocol.RECORDED_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        failures = doc.get(protocol.ORIGINAL_FAILURES) if isinstance(doc, dict) else None
        if isinstance(failures, dict):
            found.update({str(k): str(v) for k, v in failures.items()})
    return found


def _as_with_the_original(run: RunResult, events: EventSummary, known: dict[str, str]) -> Outcome | None:
    """A run whose every failing test failed (or crashed) with the original extension too: those tests judge
    nothing of the port. None where some failure is the kernel's alone."""
    if run.timed_out:
        return None
    if events.unfinished:
        if known.get(events.unfinished) != "crashed":
            return None
        return Outcome("error", f"crashed in {events.unfinished}, as the original extension did on the same test "
                                "where `publisher adopt --record` ran it: the test, not the port, takes the process "
                                "down, and the tests after it did not run",
                       fix=f"make {events.unfinished} pass with the original (or skip it), then test again")
    failing = [n for n in events.failing if "::" in n]
    if not failing or len(failing) != len(events.failing) or any(n not in known for n in failing):
        return None
    said = (f"{len(failing)} test(s) fail with the original extension too (recorded by `publisher adopt --record`): "
            f"{', '.join(failing[:3])}{' ...' if len(failing) > 3 else ''}; they judge nothing of the port")
    if events.counts.passed:
        return Outcome("passed", on_hardware=True, warnings=(said,), **_rests_on(events))
    return Outcome("untested", said, fix="make those tests pass with the original (or skip them), then test again")


def _asked_for_hidden(lacks: list[_Lack], events: EventSummary) -> Outcome:
    """Every failing test asked for an accelerator a cpu variant's tests do not see: they cannot test it (like a
    skip). What passed judged it; with none passed, nothing did."""
    devices = ", ".join(dict.fromkeys(lack.hidden for lack in lacks))
    said = (f"{len(lacks)} test(s) ask for {devices}, which a cpu variant's tests do not see (its users have none): "
            f"{lacks[0].nodeid}")
    fix = (f"have those tests pick the device by availability ('cuda' if torch.cuda.is_available() else 'cpu'), or "
           f"skip them without {devices}, so that they judge the cpu variant too")
    if events.counts.passed:
        return Outcome("passed", on_hardware=True, warnings=(f"{said}; they judged nothing of it ({fix})",))
    return Outcome("untested", f"{said}; nothing judged the cpu variant", fix=fix)


def _not_judged(needs: tuple[str, ...], unregistered: tuple[str, ...]) -> Outcome:
    """Ops of adopt's generated tests skipped because they refused their inputs, or because the kernel registers
    them for no kernel on their inputs' device (never called): the kernel is not judged on them."""
    reasons, fixes, checks = [], [], []
    if needs:
        whys = [r.removeprefix(protocol.NEEDS_INPUTS + ": ") for r in needs]
        lines = [m.group(1) for m in (_INPUTS_LINE.search(r) for r in whys) if m]
        where = f"at {', '.join(lines)}" if lines else "in the generated tests"
        reasons.append(f"{len(needs)} op(s) of adopt's generated tests need inputs, so the kernel was not judged on "
                       f"them: {_shown([_INPUTS_LINE.sub('', why) for why in whys])}")
        fixes.append(f"edit INPUTS {where}: give each op the shapes and dtypes it expects")
        checks.append((protocol.CHECKED_NEEDS_INPUTS, len(needs)))
    if unregistered:
        whys = [r.removeprefix(protocol.NOT_REGISTERED + ": ") for r in unregistered]
        reasons.append(f"{len(unregistered)} op(s) of adopt's generated tests are not registered for the device of "
                       f"their inputs, so they were never called: {_shown([_REGISTER_END.sub('', w) for w in whys])}")
        fixes.append("register each op's kernel for that device's dispatch key (TORCH_LIBRARY_IMPL_EXPAND beside "
                     "the function; for an op ported from a pybind11 module, rerun `publisher adopt`), or give its "
                     "INPUTS tensors of a device it is registered for")
        checks.append((protocol.CHECKED_NOT_REGISTERED, len(unregistered)))
    return Outcome("untested", "; ".join(reasons), fix="; ".join(fixes) + ", then test again", checks=tuple(checks))


def _shown(whys: list[str]) -> str:
    return "; ".join(whys[:2]) + (f" (and {len(whys) - 2} more)" if len(whys) > 2 else "")


# the end of a not-registered skip reason: what to do, said once in the fix
_REGISTER_END = re.compile(r"; the kernel's registration leaves it out there: .*$")
# the end of a needs-inputs skip reason: the INPUTS line to edit
_INPUTS_LINE = re.compile(r"; give INPUTS\[[^\]]+\] the shapes and dtypes it expects: (\S+:\d+)$")


def _rests_on(events: EventSummary) -> dict:
    """What a passing run rests on, when every passing test is one of adopt's generated tests: `ops-run`,
    with how many ops ran and how many were compared with a reference (else the run's own suite)."""
    checked = [value for _, value in events.checked]
    replay: dict = {}
    if protocol.CHECKED_ORIGINAL in checked:  # calls recorded from the original matched: said whatever else ran
        ops = {r.split(" ", 1)[0] for r in events.replayed}
        replay = {"checks": ((protocol.CHECKED_ORIGINAL, checked.count(protocol.CHECKED_ORIGINAL)),
                             (protocol.CHECKED_ORIGINAL_OPS, len(ops))),
                  "recorded_from": tuple(sorted({r.split(" ", 1)[1] for r in events.replayed if " " in r}))}
    if not checked or len(checked) != events.counts.passed:
        return replay
    ops = [v for v in checked if v != protocol.CHECKED_REGISTRATION]
    counts = tuple((kind, ops.count(kind)) for kind in (protocol.CHECKED_RAN, protocol.CHECKED_REFERENCE))
    return {**replay, "suite": OPS_RUN, "checks": counts + replay.get("checks", ())}


# the smoke test's checks whose failure proves the variant broken (default_test.py)
_LOAD_CHECKS = ("test_loads_through_kernels", "test_ops_registered_under_metadata_id")


def _smoke_verdict(run: RunResult, events: EventSummary, smoke: SmokeLog | None, options: TestOptions) -> Outcome:
    """A smoke test or load check that did not pass: failed only when it proves the variant broken."""
    crash = _smoke_crash(run, smoke) if smoke is not None else None
    if crash:
        return Outcome("untested", f"no tests of its own, and the smoke test {crash}, on inputs publisher made "
                                   "(derived from the package's code or guessed), which the kernel may never be "
                                   "meant to get: no verdict either way",
                       fix="add tests/ that call the kernel's ops on the inputs they are meant for")
    checks = [n for n in events.failing if n.rsplit("::", 1)[-1] in _LOAD_CHECKS]
    if checks and not run.timed_out:
        raised = {str(e.get("nodeid")): f"{e.get('type')}: {e.get('message')}" for e in events.exceptions}
        why = raised.get(checks[0]) or run.first_error_line()
        what = ("does not load through `kernels`" if checks[0].endswith(_LOAD_CHECKS[0])
                else "registers no op under its namespace")
        return Outcome("failed", f"the variant {what}: {why}", on_hardware=True)
    if run.timed_out:
        return Outcome("error", f"the smoke test did not finish within {int(options.timeout)}s (--timeout)",
                       fix="raise --timeout, or add tests/ of the project's own")
    return Outcome("error", f"the smoke test did not finish: {run.first_error_line()}",
                   fix="add tests/ of the project's own; publisher's smoke test could not judge this variant")


def _not_exercised(smoke: SmokeLog) -> str:
    shown = [describe_call(c.entry()) for c in smoke.calls[:4]]
    more = f" (and {len(smoke.calls) - 4} more)" if len(smoke.calls) > 4 else ""
    return "; ".join(shown) + more if shown else "it registers no op and exports no function"


def _smoke_crash(run: RunResult, smoke: SmokeLog) -> str | None:
    """The smoke call that killed the process or the device, said as what happened, or None."""
    fatal = next((c for c in smoke.calls if c.outcome == FATAL), None)
    if fatal is not None:
        return f"left the accelerator unusable in {fatal.target}({fatal.inputs}): {fatal.detail}"
    unfinished = smoke.unfinished
    if unfinished is not None and run.returncode < 0:
        return f"crashed ({_signal_name(run.returncode)}) calling {unfinished.target}({unfinished.inputs})"
    if unfinished is not None and not run.timed_out:
        return f"exited (code {run.returncode}) calling {unfinished.target}({unfinished.inputs})"
    return None


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _failure_reason(result: RunResult, events: EventSummary, options: TestOptions,
                    environment: frozenset[str] = frozenset()) -> str:
    """Why a run failed; `environment`: failing nodes that say nothing about the kernel (named last)."""
    where = f" in {events.unfinished}" if events.unfinished else ""
    if result.timed_out:
        return f"timed out after {int(options.timeout)}s{where} (--timeout)"
    if result.returncode < 0:
        return f"crashed ({_signal_name(result.returncode)}){where}"
    if events.unfinished and "Timeout" in result.output:
        return f"test timed out after {int(options.test_timeout)}s{where} (--test-timeout)"
    if events.unfinished:
        return f"the process exited (code {result.returncode}){where}"
    if events.counts.errors and not events.counts.failed and any("::" not in n for n in events.failing):
        # modules that could not be collected (pytest went on with the others, and none of them failed)
        judged = [n for n in events.failing if n not in environment] or list(events.failing)
        raised = next((f"{e.get('type')}: {e.get('message')} (raised in {_where(e)})" for e in events.exceptions
                       if str(e.get("nodeid") or "") in judged), None)
        return "tests could not be collected: " + ", ".join(judged[:3]) + (f" ({raised})" if raised else "")
    failing = ", ".join(events.failing[:3]) + (" ..." if len(events.failing) > 3 else "")
    if not failing:
        return result.first_error_line()
    first = next((e for e in events.exceptions if e.get("nodeid") == events.failing[0]), None)
    said = f" (the first: {e_type}: {str(first.get('message') or '').splitlines()[0][:400]})" \
        if first and (e_type := first.get("type")) and str(first.get("message") or "").strip() else ""
    return f"{events.counts.failed + events.counts.errors} test(s) failed: {failing}{said}"


def _where(exception: dict) -> str:
    file = str(exception.get("file") or "?")
    shown = "/".join(Path(file).parts[-3:]) if Path(file).is_absolute() else file
    return f"{shown}:{exception.get('line')}"


def _untested_reason(events: EventSummary, tests: Path) -> str:
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
