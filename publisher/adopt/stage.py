"""The adopt stage as a call: plan, then (unless a dry run) write the plan in
one go. A plan that would change an existing file is written only with
--force, and every file it changes is first copied to
build/.publisher/adopt/<time>/ (the originals are never lost)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from publisher.adopt import record
from publisher.adopt.discover import discover
from publisher.adopt.model import AdoptPlan, FileChange
from publisher.adopt.plan import AdoptSettings, make_plan
from publisher.adopt.record import Recording
from publisher.codes import finding
from publisher.errors import UsageError
from publisher.findings import Finding, has_errors
from publisher.options import AdoptOptions
from publisher.state import STATE_DIR

BACKUP_DIR = f"build/{STATE_DIR}/adopt"


@dataclass(frozen=True)
class AdoptResult:
    options: AdoptOptions
    plan: AdoptPlan
    findings: tuple[Finding, ...]  # the plan's, and why nothing was written
    written: tuple[str, ...] = ()
    backup: str | None = None  # where the changed files' originals were copied
    recording: Recording | None = None  # --record: what was recorded

    @property
    def complete(self) -> bool:
        """Everything was ported: nothing needs hands."""
        return not has_errors(self.plan.findings)


def run_adopt(options: AdoptOptions) -> AdoptResult:
    recording = None
    if options.record:
        found = discover(Path(options.path))  # a folder with no extension is said before anything is written there
        log = None if options.dry_run else Path(options.path) / f"build/{STATE_DIR}/logs/adopt-record.log"
        try:
            if log is not None:
                log.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UsageError(f"{log.parent}: cannot be written ({err.strerror})",
                             "make the project folder writable, or pass --dry-run to record without a log") from None
        recording = record.record(Path(options.path), found, timeout=options.record_timeout, log=log)
    settings = AdoptSettings(name=options.name, license=options.license, version=options.version,
                             repo_id=options.repo_id, recording=recording)
    plan = make_plan(options.path, settings)
    findings = list(plan.findings)
    blocked = plan.needs_force
    if blocked and not options.force and not options.dry_run:
        findings.append(finding(
            "PA161", f"{len(blocked)} existing file(s) would change: " + ", ".join(c.path for c in blocked),
            file=str(options.path),
            hint="read the plan (--dry-run shows the diffs), then rerun with --force; the originals are copied to "
                 f"{BACKUP_DIR}/ first"))
    if options.dry_run or (blocked and not options.force) or not plan.pending:
        return AdoptResult(options, plan, tuple(findings), recording=recording)
    backup = _backup(Path(options.path), [c for c in plan.pending if c.old is not None])
    written = _write(Path(options.path), plan.pending)
    return AdoptResult(options, plan, tuple(findings), written, backup, recording)


def _backup(root: Path, changes: list[FileChange]) -> str | None:
    if not changes:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    folder = root / BACKUP_DIR / stamp
    suffix = 1
    while folder.exists():
        suffix += 1
        folder = root / BACKUP_DIR / f"{stamp}-{suffix}"
    for change in changes:
        target = folder / change.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / change.path, target)
    return str(folder.relative_to(root))


def _write(root: Path, changes: tuple[FileChange, ...]) -> tuple[str, ...]:
    """Each file replaced whole (a temporary file renamed over it): a file is either old or new, never half."""
    written = []
    for change in changes:
        target = root / change.path
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o7777 if target.exists() else None
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".adopt")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(change.new)
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(change.path)
    return tuple(written)
