"""Running many variants: selection of what to rebuild (content-addressed
cache), parallel builds within a jobs x cores budget, keep-going or
fail-fast, validation, the atomic move into place, reports and progress."""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from publisher import runner, state
from publisher.builder import atomic as staging
from publisher.builder.abi import AbiReport, check_abi
from publisher.builder.backend import Backend, BuildOptions, BuildOutcome, BuildRequest
from publisher.builder.fatbin import archs_problems
from publisher.builder.inputs import input_key, inputs_fingerprint, source_digest
from publisher.builder.jobserver import JobServer
from publisher.builder.metadata import METADATA, check_variant, read_metadata, stamp_inputs
from publisher.data import data_path
from publisher.errors import BuildFailed, ToolchainUnavailable
from publisher.git import git_state
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project
from publisher.ui import Progress

GIB = 1024**3
UNAVAILABLE_TTL = 3600  # seconds an unavailable toolchain is not retried (--force retries)
COMPILE_MEMORY = data_path("compile_memory.yaml")

if TYPE_CHECKING:
    from publisher.builder.hub_cache import HubCache  # imported by whoever makes one (the Hub client is slow to import)


# The states in which build/<variant>/ holds the variant asked for (anything else fails the build command).
BUILT_STATES = ("built", "fetched", "cached", "built-remote")


@dataclass(frozen=True)
class VariantResult:
    variant: str
    state: str  # built, fetched (from the hub cache), cached, failed, unavailable, cancelled
    seconds: float = 0.0
    error: str | None = None  # first error line (failed)
    reason: str | None = None  # why no toolchain (unavailable)
    abi: AbiReport | None = None
    fingerprint: str | None = None
    inputs: str | None = None
    source: str | None = None  # "hub cache <repo>@<commit>" when fetched, not compiled
    backend: str = ""
    log: str = ""
    toolchain: dict = field(default_factory=dict)
    at: float = field(default_factory=time.time)  # when this result was established

    def report_entry(self) -> dict:
        return {
            "state": self.state,
            "at": round(self.at, 3),
            "fingerprint": self.fingerprint,
            "inputs": self.inputs,
            "from": self.source,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "reason": self.reason,
            "abi": self.abi.as_dict() if self.abi else None,
            "backend": self.backend,
            "log": self.log,
            "toolchain": self.toolchain,
        }

    def as_dict(self) -> dict:
        return {"variant": self.variant, **self.report_entry()}


def default_budget(planned: Sequence[PlannedVariant], jobs: int | None, cores: int | None) -> tuple[int, int]:
    """(jobs, cores): parallel variants x compiler processes each, within the
    machine's cores and its free memory (nvcc is memory hungry)."""
    procs = max(1, min(os.cpu_count() or 1, memory_slots(planned)))
    if jobs and cores:
        return jobs, cores
    if jobs:
        return jobs, max(1, procs // jobs)
    if cores:
        return max(1, min(len(planned) or 1, procs // cores)), cores
    jobs = max(1, min(len(planned) or 1, procs // 2))
    return jobs, max(1, procs // jobs)


def compile_slots(planned: Sequence[PlannedVariant], options: BuildOptions) -> int:
    """Slots of the run's jobserver: jobs x cores, shared by every variant in
    flight, within the free memory (less one compile per variant: each ninja
    runs one beyond the pool, see jobserver.py)."""
    return max(1, min(options.jobs * options.cores, memory_slots(planned) - options.jobs))


def memory_slots(planned: Sequence[PlannedVariant]) -> int:
    """How many compiles the free memory holds (resources/compile_memory.yaml)."""
    per_compile = yaml.safe_load(COMPILE_MEMORY.read_text())
    gib = per_compile["nvcc"] if any(p.backend == "cuda" for p in planned) else per_compile["cxx"]
    return int(_available_memory() // (gib * GIB))


def _available_memory() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 * GIB


def failed_in_report(build_dir: Path) -> set[str]:
    report = state.read_report(state.build_report_path(build_dir))
    return {name for name, e in report["variants"].items() if e.get("state") in ("failed", "cancelled")}


class Scheduler:
    def __init__(self, project: Project, backend: Backend, build_dir: Path, options: BuildOptions,
                 progress: Progress, fail_fast: bool = False, hub_cache: HubCache | None = None):
        self.project = project
        self.backend = backend
        self.build_dir = Path(build_dir)
        self.options = options
        self.progress = progress
        self.fail_fast = fail_fast
        self.hub_cache = None if options.force else hub_cache
        self.cancel = threading.Event()
        self._report_lock = threading.Lock()

    def run(self, planned: Sequence[PlannedVariant]) -> list[VariantResult]:
        assert self.project.root is not None
        self.backend.check_environment()
        runner.allow_new()
        with staging.build_lock(self.build_dir):
            state.logs_dir(self.build_dir).mkdir(parents=True, exist_ok=True)
            self._report = state.read_report(state.build_report_path(self.build_dir))
            git = git_state(self.project.root)
            self._sources = source_digest(self.project)
            self._revision = git.revision if git else None
            self.progress.start([p.name for p in planned])
            self._jobserver = JobServer(compile_slots(planned, self.options))
            results: dict[str, VariantResult] = {}
            pool = ThreadPoolExecutor(max_workers=max(1, self.options.jobs), thread_name_prefix="build")
            futures: dict[Future, PlannedVariant] = {pool.submit(self._one, p): p for p in planned}
            try:
                pending = set(futures)
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    for fut in done:
                        res = fut.result()
                        results[res.variant] = res
                        if res.state == "failed" and self.fail_fast and not self.cancel.is_set():
                            self._stop()
            except KeyboardInterrupt:
                self._stop()
                pool.shutdown(wait=True, cancel_futures=True)
                self.progress.close()
                raise
            finally:
                # every worker has finished: the refusal that _stop set up must not outlive this run
                pool.shutdown(wait=True)
                runner.allow_new()
                self._jobserver.close()
            self.progress.close()
            return [results[p.name] for p in planned if p.name in results]

    def _stop(self) -> None:
        self.cancel.set()
        runner.kill_all()

    # -- one variant -------------------------------------------------------

    def _one(self, planned: PlannedVariant) -> VariantResult:
        name = planned.name
        log = state.logs_dir(self.build_dir) / f"{name}.log"
        base = VariantResult(name, "cancelled", backend=self.backend.name, log=str(log))
        if self.cancel.is_set():
            self.progress.update(name, "cancelled")
            return base
        t0 = time.monotonic()
        fingerprint = inputs_fingerprint(self.project, planned, self.options, self.backend.name, self._sources)
        key = input_key(fingerprint, self.backend.input_identity(planned), self._revision)
        base = replace(base, inputs=key)
        cached = self._cached(planned, key)
        if cached is not None:
            res = replace(cached, seconds=time.monotonic() - t0, log=str(log), backend=self.backend.name)
            if self.options.strict and res.abi and not res.abi.ok:
                res = replace(res, state="failed", error=f"ABI: {res.abi.violations[0]}")
            return self._finish(res)
        log.write_text("")
        self.progress.update(name, "building", log=log)
        stage = staging.new_stage(self.build_dir, name)
        work = staging.work_dir(self.build_dir, name)
        request = BuildRequest(self.project, planned, stage, log, work, self.options, self._jobserver)
        try:
            fetched = self._from_hub(planned, fingerprint, stage, log)
            if fetched:
                outcome = BuildOutcome(toolchain=recorded_toolchain(stage))
            else:
                outcome = self.backend.build(request, lambda line: self.progress.line(name, line))
                stamp_inputs(stage, fingerprint)
            if self.cancel.is_set():
                raise BuildFailed("cancelled")
            self.progress.update(name, "checking")
            self._validate(stage)
            abi = check_abi(stage) if any(stage.rglob("*.so")) else AbiReport()
            if abi.violations:
                _append(log, "ABI check:\n" + "\n".join(f"  {v}" for v in abi.violations))
            if self.options.strict and not abi.ok:
                raise BuildFailed(f"ABI: {abi.violations[0]}")
            target = self.build_dir / name
            staging.promote(stage, target)
            # the toolchain may have been created by this build: key the cache on what it is now
            key = input_key(fingerprint, self.backend.input_identity(planned), self._revision)
            res = replace(base, state="fetched" if fetched else "built", inputs=key, abi=abi,
                          toolchain=outcome.toolchain, fingerprint=state.variant_fingerprint(target),
                          source=f"hub cache {fetched}" if fetched else None)
        except ToolchainUnavailable as err:
            _append(log, f"toolchain unavailable: {err.reason}")
            res = replace(base, state="unavailable", reason=err.reason)
        except BuildFailed as err:
            _append(log, f"build failed: {err.first_error}")
            res = replace(base, state="failed", error=err.first_error)
        except Exception as err:  # a bug or an unexpected environment: keep going, keep the traceback
            _append(log, traceback.format_exc())
            res = replace(base, state="failed", error=f"{type(err).__name__}: {err}")
        finally:
            staging.discard(stage)
        if self.cancel.is_set() and res.state != "built":  # killed by Ctrl-C / --fail-fast, not a verdict
            res = replace(res, state="cancelled")
        return self._finish(replace(res, seconds=time.monotonic() - t0))

    def _cached(self, planned: PlannedVariant, key: str) -> VariantResult | None:
        if self.options.force:
            return None
        entry = self._report["variants"].get(planned.name) or {}
        target = self.build_dir / planned.name
        if entry.get("inputs") != key:
            return None
        if entry.get("state") == "unavailable" and time.time() - entry.get("at", 0) < UNAVAILABLE_TTL:
            # obtaining a toolchain can take seconds (index timeouts); do not retry on every run
            return VariantResult(planned.name, "unavailable", inputs=key, reason=entry.get("reason"), at=entry["at"])
        if entry.get("state") not in BUILT_STATES:
            return None
        if not (target / METADATA).is_file() or state.variant_fingerprint(target) != entry.get("fingerprint"):
            return None
        if not check_variant(target).ok:
            return None
        abi = entry.get("abi") or {}
        return VariantResult(
            planned.name, "cached", inputs=key, fingerprint=entry["fingerprint"],
            abi=AbiReport(violations=tuple(abi.get("violations", ()))), toolchain=entry.get("toolchain") or {},
        )

    def _from_hub(self, planned: PlannedVariant, fingerprint: str, stage: Path, log: Path) -> str | None:
        """The hub cache's `<repo>@<commit>` when it filled the stage, else None (build it)."""
        if self.hub_cache is None:
            return None
        self.progress.update(planned.name, "fetching", log=log)
        found = self.hub_cache.fetch(planned.name, fingerprint, stage)
        _append(log, f"hub cache: {found.reason}" + ("" if found.source else "; building"))
        if not found.source:
            self.progress.update(planned.name, "building", log=log)
        return found.source

    def _validate(self, stage: Path) -> None:
        check = check_variant(stage)
        if not check.ok:  # metadata.json read by the kernels client's own parser, and the digest
            raise BuildFailed(f"invalid variant: {check.problems[0]}")
        wrong_archs = archs_problems(stage, check.metadata)
        if wrong_archs:  # `kernels` refuses or admits GPUs by these archs: they must be the binary's
            raise BuildFailed("backend.archs in metadata.json differ from the GPU code of the library: "
                              + "; ".join(wrong_archs))

    def _finish(self, res: VariantResult) -> VariantResult:
        detail = res.error or res.reason or (f"from {res.source}" if res.source else "")
        if not detail and res.abi and not res.abi.ok:
            detail = f"ABI: {len(res.abi.violations)} violation(s)"
        self.progress.update(res.variant, res.state, detail=detail, seconds=res.seconds, log=Path(res.log))
        if res.state != "cancelled":
            with self._report_lock:
                state.update_report(state.build_report_path(self.build_dir), {res.variant: res.report_entry()})
        return res


def recorded_toolchain(variant_dir: Path) -> dict:
    """The toolchain versions a fetched variant's builder recorded (for the summary)."""
    provenance = read_metadata(variant_dir).get("provenance") or {}
    toolchain = provenance.get("toolchain") if isinstance(provenance, dict) else None
    return dict(toolchain) if isinstance(toolchain, dict) else {}


def _append(log: Path, text: str) -> None:
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(text.rstrip("\n") + "\n")
