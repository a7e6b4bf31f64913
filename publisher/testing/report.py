"""Test results: counting pytest events, the report entry the push stage
reads, and the table the CLI shows."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from publisher.secrets import redact
from publisher.testing import protocol
from publisher.testing.smoke import describe_call

DEVICE_KEYS = ("gpu", "driver", "torch", "cuda", "platform", "python", "capability", "hidden")
TAIL_LINES = 60
TAIL_CHARS = 6000


@dataclass(frozen=True)
class TestCounts:
    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0

    def __str__(self) -> str:
        parts = [f"{n} {k}" for k, n in asdict(self).items() if n]
        return ", ".join(parts) or "no tests"


@dataclass(frozen=True)
class EventSummary:
    counts: TestCounts
    unfinished: str | None  # the test that was running when the process died
    failing: tuple[str, ...] = ()  # node ids of failed/errored tests
    skip_reasons: tuple[str, ...] = ()  # distinct, in order seen
    exceptions: tuple[dict, ...] = ()  # what each failing test or collector raised (plugin's "exception" events)
    flaky_unretried: tuple[str, ...] = ()  # failing tests marked flaky that nothing here ran again
    checked: tuple[tuple[str, str], ...] = ()  # (node id, what it checked) of passing tests that said (protocol.CHECKED)
    replayed: tuple[str, ...] = ()  # "<op> <program>" of each passing replay of a recorded call (protocol.REPLAYED)

    @property
    def needs_inputs(self) -> tuple[str, ...]:
        """Skip reasons of adopt's generated tests whose op refused the inputs they gave it."""
        return self._skipped_as(protocol.NEEDS_INPUTS)

    @property
    def not_registered(self) -> tuple[str, ...]:
        """Skip reasons of adopt's generated tests whose op has no kernel for the device of its inputs."""
        return self._skipped_as(protocol.NOT_REGISTERED)

    def _skipped_as(self, label: str) -> tuple[str, ...]:
        return tuple(r for r in (s.removeprefix("Skipped: ") for s in self.skip_reasons) if r.startswith(label + ":"))


def read_events(path: Path) -> EventSummary:
    """Fold the plugin's JSON lines into counts. A test that started and never
    finished (segfault, hang killed by a timeout) counts as failed."""
    outcome: dict[str, str] = {}
    started: list[str] = []
    finished: set[str] = set()
    collect_errors: list[str] = []
    skip_reasons: dict[str, None] = {}
    exceptions: list[dict] = []
    flaky: dict[str, None] = {}
    checked: dict[str, str] = {}
    replayed: dict[str, str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if not isinstance(ev, dict):
            continue
        kind, node = ev.get("event"), ev.get("nodeid", "")
        if kind == "exception":
            exceptions.append(ev)
        elif kind == "collect-error":
            collect_errors.append(node)
        elif kind == "start":
            started.append(node)
        elif kind == "finish":
            finished.add(node)
        elif kind == "report":
            outcome[node] = _fold(outcome.get(node), ev)
            if ev.get("flaky_unretried"):
                flaky.setdefault(node, None)
            if ev.get("reason"):
                skip_reasons.setdefault(str(ev["reason"]), None)
            properties = ev.get("properties")
            if isinstance(properties, dict) and protocol.CHECKED in properties:
                checked[node] = str(properties[protocol.CHECKED])
            if isinstance(properties, dict) and protocol.REPLAYED in properties:
                replayed[node] = str(properties[protocol.REPLAYED])
    unfinished = next((n for n in reversed(started) if n not in finished), None)
    if unfinished is not None:
        outcome[unfinished] = "failed"
    values = list(outcome.values())
    counts = TestCounts(
        passed=values.count("passed"),
        failed=values.count("failed"),
        skipped=values.count("skipped"),
        errors=values.count("error") + len(collect_errors),
    )
    failing = tuple(collect_errors) + tuple(n for n, o in outcome.items() if o in ("failed", "error"))
    passed = tuple((n, checked[n]) for n, o in outcome.items() if o == "passed" and n in checked)
    replays = tuple(replayed[n] for n, o in outcome.items() if o == "passed" and n in replayed)
    return EventSummary(counts, unfinished, failing, tuple(skip_reasons), tuple(exceptions), tuple(flaky), passed,
                        replays)


def _fold(previous: str | None, ev: dict) -> str | None:
    """One test's outcome from its setup/call/teardown reports."""
    when, result = ev.get("when"), ev.get("outcome")
    if previous in ("failed", "error"):
        return previous
    if result == "failed":
        return "failed" if when == "call" else "error"
    if result == "skipped":
        return "skipped"
    return "passed" if when == "call" else previous


_HARNESS_FRAME = re.compile(r'^\s*File "[^"]*(/_pytest/|/pluggy/|<frozen runpy>|/pytest/__main__\.py)')


def _drop_harness_frames(lines: list[str]) -> list[str]:
    """Stack dumps (faulthandler, pytest-timeout) are mostly pytest's own
    frames; keep the test's. A dropped frame's source line goes with it."""
    kept: list[str] = []
    skip_source = False
    for line in lines:
        if _HARNESS_FRAME.match(line):
            skip_source = True
            continue
        if skip_source and line.startswith("    ") and not line.lstrip().startswith("File "):
            continue
        skip_source = False
        kept.append(line)
    return kept


def tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    kept = "\n".join(_drop_harness_frames(text.rstrip().splitlines())[-lines:])
    return redact(kept[-chars:])


@dataclass(frozen=True)
class VariantTestResult:
    variant: str
    status: str  # passed | failed | untested (nothing ran: all skipped or none collected) | loaded-not-run | error
    fingerprint: str | None
    on_hardware: bool
    device: dict = field(default_factory=dict)
    tests: TestCounts = TestCounts()
    seconds: float = 0.0
    output_tail: str = ""
    time: str = ""
    reason: str = ""  # one line: why it failed / was not run; empty when passed
    log: str | None = None
    fix: str = ""  # for `error` (and some `untested`): what to do
    suite: str = ""  # what ran: project (its own tests), ops-run (only adopt's generated tests), smoke, load-check
    smoke: tuple[dict, ...] = ()  # the smoke test's calls (target, outcome, inputs, detail)
    warnings: tuple[str, ...] = ()  # e.g. "not torch.compile-ready" (never a failure)
    runs: tuple[dict, ...] = ()  # tested elsewhere (remote jobs): one summary per job (flavor, gpu, job, status)
    checks: tuple[tuple[str, int], ...] = ()  # ops-run: ops that ran / matched a reference (("ran", n), ("reference", m))
    modules: tuple[dict, ...] = ()  # test modules that could not be collected: {module, status, reason, fix}
    recorded_from: tuple[str, ...] = ()  # the project's programs the replayed calls were recorded from

    def entry(self) -> dict:
        """The test-report entry (state.update_report) the push stage reads."""
        return {
            "status": self.status,
            "fingerprint": self.fingerprint,
            "on_hardware": self.on_hardware,
            "device": {k: self.device.get(k) for k in DEVICE_KEYS},
            "tests": asdict(self.tests),
            "suite": self.suite,
            "smoke": list(self.smoke),
            **({"checks": dict(self.checks)} if self.checks else {}),
            **({"recorded_from": list(self.recorded_from)} if self.recorded_from else {}),
            "warnings": list(self.warnings),
            "seconds": round(self.seconds, 2),
            "output_tail": self.output_tail,
            "time": self.time,
            "reason": self.reason,
            "fix": self.fix,
            "log": self.log,
            **({"runs": list(self.runs)} if self.runs else {}),
            **({"modules": list(self.modules)} if self.modules else {}),
        }

    @classmethod
    def from_entry(cls, variant: str, entry: dict) -> VariantTestResult:
        """The result a report entry records (e.g. one a remote job sent back)."""
        counts = entry.get("tests") or {}
        return cls(
            variant=variant, status=str(entry.get("status", "error")), fingerprint=entry.get("fingerprint"),
            on_hardware=bool(entry.get("on_hardware")), device=dict(entry.get("device") or {}),
            tests=TestCounts(**{k: int(counts.get(k, 0)) for k in ("passed", "failed", "skipped", "errors")}),
            seconds=float(entry.get("seconds") or 0.0), output_tail=str(entry.get("output_tail") or ""),
            time=str(entry.get("time") or ""), reason=str(entry.get("reason") or ""), log=entry.get("log"),
            fix=str(entry.get("fix") or ""), suite=str(entry.get("suite") or ""),
            smoke=tuple(entry.get("smoke") or ()), warnings=tuple(entry.get("warnings") or ()),
            runs=tuple(entry.get("runs") or ()),
            checks=tuple((str(k), v) for k, v in (entry.get("checks") or {}).items() if isinstance(v, int)),
            modules=tuple(m for m in entry.get("modules") or () if isinstance(m, dict)),
            recorded_from=tuple(str(r) for r in entry.get("recorded_from") or ()),
        )


# How a status reads in tables and on the card.
STATUS_LABELS = {"loaded-not-run": "loaded, not run", "untested": "untested (no test ran)"}


def status_label(entry: dict, labels: dict[str, str] = STATUS_LABELS) -> str:
    """A report entry's status in a few words that say what happened: an untested variant whose tests ran but
    whose generated tests' ops refused their inputs says so, not that no test ran."""
    status = str(entry.get("status", "?"))
    checks = entry.get("checks") or {}
    needs = int(checks.get(protocol.CHECKED_NEEDS_INPUTS, 0))
    unregistered = int(checks.get(protocol.CHECKED_NOT_REGISTERED, 0))
    if status == "untested" and (needs or unregistered):
        parts = ([f"{needs} generated test(s) need inputs"] if needs else []) + \
            ([f"{unregistered} generated test(s) call ops not registered for their device"] if unregistered else [])
        return f"untested: {', '.join(parts)} (see fix)"
    return labels.get(status, status)


def describe_device(device: dict) -> str:
    torch = f"torch {device.get('torch')}" if device.get("torch") else "torch ?"
    cuda = f" CUDA {device['cuda']}" if device.get("cuda") else ""
    where = device.get("gpu") or "CPU"
    driver = f" (driver {device['driver']})" if device.get("driver") else ""
    hidden = f" ({', '.join(device['hidden'])} hidden)" if device.get("hidden") else ""
    return f"{where}{hidden}{driver}, {torch}{cuda}"


def describe_suite(result: VariantTestResult) -> str:
    """What the verdict rests on, in a few words."""
    if result.suite == "smoke":
        exercised = sum(1 for c in result.smoke if c.get("outcome") == "exercised")
        return f"smoke test only ({exercised} of {len(result.smoke)} calls exercised)"
    if result.suite == OPS_RUN:
        return describe_checks(result.entry())
    if dict(result.checks).get(protocol.CHECKED_ORIGINAL):
        return f"the project's tests; {describe_checks(result.entry())}"
    return {"project": "the project's tests", "load-check": "load check"}.get(result.suite, result.suite or "-")


# A verdict resting only on adopt's generated tests (the project has none of its own)
OPS_RUN = "ops-run"


def describe_checks(entry: dict) -> str:
    """What adopt's generated tests checked, for a verdict that rests on them (a report entry of suite ops-run), or
    that the project's tests were joined by (calls recorded from the original, replayed)."""
    checks = entry.get("checks") or {}
    ran, reference = int(checks.get(protocol.CHECKED_RAN, 0)), int(checks.get(protocol.CHECKED_REFERENCE, 0))
    original = int(checks.get(protocol.CHECKED_ORIGINAL, 0))
    if original:
        sources = ", ".join(entry.get("recorded_from") or ()) or "the project's code"
        said = (f"matches the original on {original} call(s) of {int(checks.get(protocol.CHECKED_ORIGINAL_OPS, 0))} "
                f"op(s) (recorded from {sources})")
        if reference:
            return f"{said}; {ran + reference} other op(s) called, {reference} of them compared with the project's reference"
        return f"{said}; {ran} other op(s) run only" if ran else said
    if not reference:
        return f"ops run only: {ran} op(s) called and returned what their schemas say, none compared with a reference"
    return (f"adopt's generated tests only: {ran + reference} op(s) called, {reference} of them compared with the "
            "project's reference")


def render_table(results: list[VariantTestResult]) -> str:
    rows = [("VARIANT", "RESULT", "TESTS", "ON", "TIME")]
    for r in results:
        label = status_label(r.entry())
        where = describe_device(r.device) if r.device else "-"
        if len(r.runs) > 1:
            where = "; ".join(f"{run.get('gpu') or run.get('flavor')}: {run.get('status')}" for run in r.runs)
        elif r.runs:
            where += f" [{r.runs[0].get('place')} {r.runs[0].get('flavor')}]"
        rows.append((r.variant, label, str(r.tests), where, f"{r.seconds:.1f}s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    for r in results:
        if r.reason:
            lines.append(f"  {r.variant}: {r.reason}")
        if r.fix:
            lines.append(f"    fix: {r.fix}")
        for module in r.modules:
            lines.append(f"  {r.variant}: {module.get('module')}: {module.get('status')}: {module.get('reason')}")
            if module.get("fix"):
                lines.append(f"    fix: {module.get('fix')}")
        if r.suite == "smoke":
            lines.append(f"  {r.variant}: {describe_suite(r)}: the project has no tests/ of its own")
            lines += [f"    {describe_call(c)}" for c in r.smoke]
        if r.suite == OPS_RUN:
            said = describe_suite(r)
            said = f"the kernel {said}" if dict(r.checks).get(protocol.CHECKED_ORIGINAL) else f"the verdict rests on {said}"
            lines.append(f"  {r.variant}: {said} (the project has no tests of its own)")
        elif dict(r.checks).get(protocol.CHECKED_ORIGINAL):
            lines.append(f"  {r.variant}: {describe_suite(r)}")
        lines += [f"  {r.variant}: warning: {w}" for w in r.warnings]
    return "\n".join(lines)

