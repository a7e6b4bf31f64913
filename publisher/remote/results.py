"""What remote jobs sent back, as test-report entries: each job's entries
checked against the variants sent (fingerprint), a job that ended without a
result turned into `error` entries that say why and what to do (never
`failed`: nothing showed the kernel wrong), and a variant tested on several
targets given one verdict — the worst of its runs — with every run listed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone

from publisher.remote.runner import JobOutcome

# worst first: a variant tested on several GPUs stands as its worst run
_RANK = {"failed": 0, "error": 1, "untested": 2, "loaded-not-run": 3, "passed": 4}


def _no_result(outcome: JobOutcome, variant: str, fingerprint: str | None) -> dict:
    plan = outcome.plan
    where = f"job {outcome.job_id} on {plan.target.name}" if outcome.job_id else f"the job on {plan.target.name}"
    message = f": {outcome.message}" if outcome.message else ""
    tail = outcome.tail()
    if outcome.payload is not None and not outcome.payload.get("ok", False):
        reason = f"{where}: publisher's test stage stopped: {outcome.payload.get('error')}"
        fix = outcome.payload.get("hint") or "see the job's log"
    elif "timed out" in outcome.message or "timeout" in outcome.message:
        reason = f"{where} ran out of time{message} before it reported"
        fix = "raise --job-timeout (or --timeout for each variant's tests), then test again"
    elif outcome.stage == "CANCELED":
        reason = f"{where} was cancelled{message} before it reported"
        fix = "test again"
    elif "publisher job: pip could not install" in tail or "publisher job: the image has no python3" in tail:
        reason = f"{where}: publisher could not be installed in the image {plan.image}"
        fix = "name an image with Python 3.10+ and pip (and network access to PyPI) with --image"
    elif outcome.stage == "ERROR" and any(w in outcome.message.lower() for w in ("pull", "image", "manifest")):
        reason = f"{where} could not start the image {plan.image}{message}"
        fix = "name an image the place can pull with --image"
    else:
        reason = f"{where} ended {outcome.stage}{message} before it reported a result"
        fix = "see the job's log (its end is in output_tail); test again once the cause is fixed"
    return {
        "status": "error", "fingerprint": fingerprint, "on_hardware": False, "device": {}, "tests": {},
        "suite": "", "smoke": [], "warnings": [], "seconds": outcome.seconds or 0.0, "output_tail": tail,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "reason": reason, "fix": fix, "log": None,
    }


def _run_summary(place: str, outcome: JobOutcome, entry: dict) -> dict:
    device = entry.get("device") or {}
    return {"place": place, "flavor": outcome.plan.target.name, "job": outcome.job_id,
            "url": outcome.url, "image": outcome.plan.image, "gpu": device.get("gpu"), "status": entry.get("status"),
            "tests": entry.get("tests") or {}, "time": entry.get("time")}


def entries_from(place: str, outcomes: Sequence[JobOutcome], fingerprints: Mapping[str, str | None]) -> dict[str, dict]:
    """variant -> its merged report entry, for every variant the jobs were asked to test."""
    runs: dict[str, list[tuple[JobOutcome, dict]]] = {}
    for outcome in outcomes:
        sent = (outcome.payload or {}).get("entries") if (outcome.payload or {}).get("ok") else None
        for variant in outcome.plan.request.variants:
            expected = fingerprints.get(variant)
            entry = (sent or {}).get(variant)
            if not isinstance(entry, dict):
                entry = _no_result(outcome, variant, expected)
            elif entry.get("fingerprint") != expected:
                entry = dict(_no_result(outcome, variant, expected),
                             reason=f"job {outcome.job_id} tested a different build of {variant} "
                                    f"(fingerprint {str(entry.get('fingerprint'))[:12]}, here {str(expected)[:12]})",
                             fix="test again (was the variant rebuilt while the job ran?)")
            else:  # its log file stayed in the job: the job's own log (its URL) is where to read it
                entry = dict(entry, log=outcome.url)
            runs.setdefault(variant, []).append((outcome, entry))
    merged: dict[str, dict] = {}
    for variant, done in runs.items():
        _, worst = min(done, key=lambda pair: _RANK.get(pair[1].get("status"), 1))
        entry = dict(worst)
        entry["runs"] = [_run_summary(place, outcome, e) for outcome, e in done]
        merged[variant] = entry
    return merged


def gpus_passed(entry: Mapping) -> list[str]:
    """The GPUs a variant passed its tests on, as its report entry records them."""
    runs = entry.get("runs") or []
    if runs:
        return list(dict.fromkeys(r.get("gpu") or r.get("flavor") for r in runs if r.get("status") == "passed"))
    device = entry.get("device") or {}
    return [device["gpu"]] if entry.get("status") == "passed" and device.get("gpu") else []
