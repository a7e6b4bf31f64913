"""What the default smoke test did, read from the JSON lines it writes
($PUBLISHER_TEST_SMOKE_OUT, see default_test.py): every call it made, on
which inputs, and how it ended (exercised, not exercised and why, or fatal);
the call that was under way when the process died; and its warnings (not
torch.compile-ready, ops the package calls that this variant lacks)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

# how a smoke call ended
EXERCISED = "exercised"
NOT_EXERCISED = "not-exercised"
FATAL = "fatal"


@dataclass(frozen=True)
class SmokeCall:
    target: str  # "op rms_norm", "function rms_norm"
    outcome: str  # exercised | not-exercised | fatal | unfinished (the process died in it)
    inputs: str = ""  # the arguments of the call that decided the outcome
    detail: str = ""  # why not exercised, or what the fatal call did

    def entry(self) -> dict:
        """As the test report holds it."""
        return {k: v for k, v in asdict(self).items() if v}


def describe_call(call: dict) -> str:
    """One smoke call (a report entry) as a line: target(inputs): outcome: detail."""
    how = f"({call['inputs']})" if call.get("inputs") else ""
    label = {EXERCISED: "exercised", NOT_EXERCISED: "not exercised", FATAL: "broke the device",
             "unfinished": "killed the process"}.get(str(call.get("outcome")), str(call.get("outcome")))
    return f"{call.get('target')}{how}: {label}" + (f": {call['detail']}" if call.get("detail") else "")


@dataclass(frozen=True)
class SmokeLog:
    calls: tuple[SmokeCall, ...]
    warnings: tuple[str, ...]

    @property
    def exercised(self) -> tuple[SmokeCall, ...]:
        return tuple(c for c in self.calls if c.outcome == EXERCISED)

    @property
    def unfinished(self) -> SmokeCall | None:
        return next((c for c in self.calls if c.outcome == "unfinished"), None)

    def hung(self) -> list[str]:
        """Targets that did not return (the smoke test ended the process after recording them)."""
        return [c.target for c in self.calls if c.outcome == NOT_EXERCISED and c.detail.startswith("did not return")]


def read_smoke(path: Path) -> SmokeLog:
    """Fold the smoke test's lines: the last word on each target counts; a call
    with no outcome after it is the one the process died in."""
    calls: dict[str, SmokeCall] = {}
    pending: dict[str, str] = {}  # target -> inputs of a call not yet ended
    warnings: dict[str, None] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # cut short by a crash
        if not isinstance(event, dict):
            continue
        kind, target = event.get("event"), str(event.get("target") or "")
        if kind == "warning" and event.get("message"):
            warnings.setdefault(str(event["message"]), None)
        elif kind == "call" and target:
            pending[target] = str(event.get("inputs") or "")
        elif kind == "outcome" and target:
            pending.pop(target, None)
            calls[target] = SmokeCall(target, str(event.get("outcome") or NOT_EXERCISED),
                                      str(event.get("inputs") or ""), str(event.get("detail") or ""))
    for target, inputs in pending.items():
        calls[target] = SmokeCall(target, "unfinished", inputs)
    return SmokeLog(tuple(calls.values()), tuple(warnings))
