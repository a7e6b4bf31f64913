"""Which built variants may be published, and why not. Every refusal names the
variant, the reason and how to override or fix it.

Codes (stable; shown with every refusal and warning): PP1xx, catalogued in
publisher/codes.py. PP104 (not tested on its hardware, or no test ran) is a
warning with --allow-untested, or with --allow-untested-variant GLOB for a
matching variant whose import was checked ("loaded, not run").

A report entry (build-report.json, test-report.json) speaks for a variant only
while its fingerprint equals the variant's current one (state.variant_fingerprint).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from publisher import state
from publisher.builder.fatbin import archs_problems
from publisher.builder.metadata import check_variant
from publisher.codes import finding
from publisher.findings import Finding, Severity
from publisher.plan.selection import matches_any
from publisher.push import signature
from publisher.testing.protocol import CHECKED_NEEDS_INPUTS, CHECKED_NOT_REGISTERED
from publisher.testing.report import status_label

# The test status of a variant whose import and ops were checked but whose tests
# could not run (no hardware for it where it was tested).
LOAD_CHECKED = "loaded-not-run"


@dataclass(frozen=True)
class Verdict:
    variant: str
    metadata: dict | None
    findings: tuple[Finding, ...]
    test: dict | None  # the test-report entry that applies, if any
    sha256: dict[str, str] | None = None  # relpath -> sha256 hex of the files the digest check just read

    @property
    def ok(self) -> bool:
        return not any(f.is_error for f in self.findings)


def _finding(code: str, severity: Severity, variant_dir: Path, message: str, hint: str | None) -> Finding:
    return finding(code, message, severity=severity, file=str(variant_dir), hint=hint)


def judge(build_dir: Path, name: str, allow_untested: bool, load_only: tuple[str, ...] = ()) -> Verdict:
    """load_only: globs of variants no runner can test on their hardware
    (--allow-untested-variant); a match is admitted only once its load check passed."""
    variant_dir = Path(build_dir) / name
    check = check_variant(variant_dir)
    rebuild = f"rebuild it: publisher build --variant '{name}'"
    if check.metadata is None:
        return Verdict(name, None, (_finding("PP101", Severity.ERROR, variant_dir,
                                             f"{name}: no valid metadata.json: {check.problems[0]}", rebuild),), None)
    if not check.ok:
        files = "; ".join(check.problems[:8]) + (f"; and {len(check.problems) - 8} more" if len(check.problems) > 8 else "")
        return Verdict(name, check.metadata, (_finding(
            "PP102", Severity.ERROR, variant_dir,
            f"{name}: files changed after the build (digest mismatch): {files}", rebuild),), None)

    fingerprint = state.variant_fingerprint(variant_dir)
    findings: list[Finding] = []
    wrong_archs = archs_problems(variant_dir, check.metadata)
    if wrong_archs:
        findings.append(_finding(
            "PP140", Severity.ERROR, variant_dir,
            f"{name}: backend.archs in metadata.json differ from the GPU code of its library: {'; '.join(wrong_archs)}",
            f"{rebuild}; `kernels` loads a variant only on the GPUs its archs name, so they must be the binary's"))
    unsigned = signature.bundle_problem(variant_dir)
    if unsigned:
        findings.append(_finding("PP130", Severity.ERROR, variant_dir, f"{name}: {unsigned}",
                                 f"sign build/{name}/metadata.json again (release.yml's sign step), or delete the bundle"))
    build = _entry(state.build_report_path(build_dir), name, fingerprint)
    abi = (build or {}).get("abi") or {}
    if abi and abi.get("ok") is False:
        violations = "; ".join(str(v) for v in (abi.get("violations") or [])[:5]) or "see the build log"
        findings.append(_finding("PP103", Severity.ERROR, variant_dir, f"{name}: ABI check failed: {violations}",
                                 _abi_fix(abi, rebuild, build.get("log") or "build/.publisher/logs")))

    test = _entry(state.test_report_path(build_dir), name, fingerprint)
    untested = _untested_reason(name, test)
    decided = standing(name, test, allow_untested, load_only)
    if decided is Standing.FAILED:
        findings.append(_finding("PP106", Severity.ERROR, variant_dir, untested or name,
                                 f"fix the kernel and run `publisher test` again (log: {(test or {}).get('log') or '?'})"))
    elif untested:
        if decided is Standing.ADMITTED and allow_untested:
            findings.append(_finding("PP104", Severity.WARNING, variant_dir, untested,
                                     "published because of --allow-untested"))
        elif decided is Standing.ADMITTED:
            findings.append(_finding("PP104", Severity.WARNING, variant_dir, untested,
                                     "published because of --allow-untested-variant: no runner can test it"))
        else:
            fix = (test or {}).get("fix") if (test or {}).get("status") in ("error", "untested") else None
            hint = (f"--allow-untested-variant admits {name} only after `publisher test --allow-load-only` checked its "
                    "import (status 'loaded-not-run')" if matches_any(name, load_only) else
                    f"{fix}; then run `publisher test` again (or pass --allow-untested to publish it anyway)" if fix else
                    f"run `publisher test` on hardware for {name}, or pass --allow-untested to publish it anyway")
            findings.append(_finding("PP104", Severity.ERROR, variant_dir, untested, hint))

    kernel = ((check.metadata.get("provenance") or {}).get("kernel")) or {}
    if kernel.get("dirty"):
        findings.append(_finding(
            "PP105", Severity.WARNING, variant_dir,
            f"{name}: built from a dirty tree (commit {str(kernel.get('commit', '?'))[:12]} plus uncommitted changes)",
            "commit your changes and rebuild so the release can be traced to a commit"))
    return Verdict(name, check.metadata, tuple(findings), test, check.sha256)


class Standing(Enum):
    """What a variant's test record means for its release: the one rule `push` and `release` apply."""

    TESTED = "tested"  # passed on its hardware
    FAILED = "failed"  # its tests failed or crashed: never published, whatever the flags
    UNTESTED = "untested"  # no test ran on its hardware (error, untested, loaded-not-run, no record): refused
    ADMITTED = "admitted"  # untested, published anyway by --allow-untested / --allow-untested-variant


def standing(name: str, test: dict | None, allow_untested: bool, load_only: tuple[str, ...] = ()) -> Standing:
    """`test`: the variant's test-report entry for this very build (None: never tested, or rebuilt since)."""
    status = (test or {}).get("status")
    if status == "failed":
        # --allow-untested is for variants nobody could test here, never for ones that failed.
        return Standing.FAILED
    if status == "passed" and (test or {}).get("on_hardware"):
        return Standing.TESTED
    if allow_untested or admitted_load_only(name, status, load_only):
        return Standing.ADMITTED
    return Standing.UNTESTED


def admitted_load_only(name: str, status: str | None, load_only: tuple[str, ...]) -> bool:
    """--allow-untested-variant: the variant matches a glob and its import was checked
    (never a failed, crashed or never-tested one)."""
    return status == LOAD_CHECKED and matches_any(name, load_only)


def _entry(report_path: Path, name: str, fingerprint: str) -> dict | None:
    entry = state.read_report(report_path)["variants"].get(name)
    if isinstance(entry, dict) and entry.get("fingerprint") == fingerprint:
        return entry
    return None


def _abi_fix(abi: dict, rebuild: str, log: str) -> str:
    """What fixes an ABI check failure. Symbols of a glibc newer than manylinux_2_28 come from the build
    machine's own C library and compiler, not from the kernel: a build in the manylinux_2_28 image fixes them."""
    if any("GLIBC" in str(v) and "newer than manylinux" in str(v) for v in abi.get("violations") or []):
        return (f"this machine's C library is newer than manylinux_2_28, and the library asks for its symbols: "
                f"{rebuild.replace('publisher build', 'publisher build --backend docker', 1)} (publisher's "
                f"manylinux_2_28 builder image) (log: {log})")
    return f"fix the ABI problems and {rebuild} (log: {log})"


def _untested_reason(name: str, test: dict | None) -> str | None:
    if test is None:
        return f"{name}: no test record for this build (never tested, or rebuilt since the last test)"
    status = test.get("status")
    if status == "passed" and test.get("on_hardware"):
        return None
    if status == "passed":
        return f"{name}: tests passed but not on the variant's hardware"
    if status == "loaded-not-run":
        return f"{name}: tests did not run on the variant's hardware (only the import was checked)"
    checks = test.get("checks") or {}
    if status == "untested" and (checks.get(CHECKED_NEEDS_INPUTS) or checks.get(CHECKED_NOT_REGISTERED)):
        return f"{name}: {status_label(test)}: {test.get('reason')}; a variant whose kernel nothing judged is not tested"
    if status == "untested":
        return f"{name}: no test ran ({test.get('reason') or 'all skipped'}); a variant nothing exercised is not tested"
    counts = test.get("tests") or {}
    failed = counts.get("failed")
    detail = f" ({failed} failed)" if status == "failed" and failed else ""
    reason = test.get("reason") or ""
    return f"{name}: tests {status}{detail}" + (f": {reason}" if reason else "")
