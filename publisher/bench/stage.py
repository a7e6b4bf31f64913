"""The bench stage as one call: the project's benchmarks/benchmark*.py against
each built variant this machine can run (as `publisher test` picks them, in
the environment the test stage would use), one subprocess per variant, the
results filed per device in build/.publisher/bench/. Used by `publisher bench`
here, and inside the remote job of `publisher bench --on` (publisher/remote/job.py),
whose results remote/stage.py files beside this machine's (file_results)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from publisher import runner, state
from publisher.bench import plot
from publisher.bench.results import TIMED, VariantBench, current_results, record
from publisher.builder.metadata import check_variant
from publisher.errors import EnvironmentProblem, PublisherError, ToolchainUnavailable, UsageError
from publisher.host import host_platform
from publisher.options import BenchCommandOptions, BenchOptions
from publisher.plan.planner import PlannedVariant
from publisher.plan.variants import Variant
from publisher.project.load import require_project
from publisher.project.model import Project
from publisher.testing import protocol, report
from publisher.testing.accelerators import hiding_for, missing_accelerator
from publisher.testing.environment import TestEnvironment, select_environment
from publisher.testing.stage import built_variants, select_variants
from publisher.testing.test_depends import declared_test_depends, kernel_depends

Sink = Callable[[str], None]
HERE = Path(__file__).parent
HARNESS_FILES = ("harness.py", "timing.py")


@dataclass(frozen=True)
class BenchRun:
    results: tuple[VariantBench, ...]
    files: tuple[Path, ...]  # the device results files this run wrote to
    plots: tuple[Path, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


def benchmark_scripts(project: Project) -> list[Path]:
    """benchmarks/benchmark*.py, the scripts `kernels benchmark` runs; a clear error when there are none."""
    assert project.root is not None
    folder = project.root / "benchmarks"
    example = ("add benchmarks/benchmark.py with a subclass of kernels.benchmark.Benchmark (setup, "
               "benchmark_<workload>, verify_<workload> returning the reference): the form `kernels benchmark` runs")
    if not folder.is_dir():
        raise UsageError(f"{project.root}: no benchmarks/ folder, so there is nothing to benchmark", example)
    scripts = sorted(p for p in folder.glob("benchmark*.py") if p.is_file())
    if not scripts:
        raise UsageError(f"{folder}: no benchmark*.py script (`kernels benchmark` runs only those)", example)
    return scripts


def run_benchmarks(project: Project, build_dir: Path, *, include: Sequence[str] = (), skip: Sequence[str] = (),
                   options: BenchOptions = BenchOptions(), matrix_path: Path | None = None,
                   on_progress: Sink = lambda line: None, on_output: Sink | None = None) -> BenchRun:
    scripts = benchmark_scripts(project)
    names = built_variants(build_dir)
    if not names:
        raise UsageError(f"{build_dir}: no built variants", f"run `publisher build {project.root}` first")
    selected = select_variants(names, include, skip)
    if not selected:
        raise UsageError("--skip leaves no built variant to benchmark", f"built variants: {', '.join(names)}")
    test_depends = declared_test_depends(project.root)

    @lru_cache(maxsize=1)
    def plan() -> dict[str, PlannedVariant]:
        from publisher.plan.matrix import find_matrix, load_matrix
        from publisher.plan.planner import make_plan

        return make_plan(project, load_matrix(find_matrix(project.root, matrix_path))).by_name()

    results: list[VariantBench] = []
    for name in selected:
        on_progress(f"benchmarking {name}")
        results.append(_bench_variant(project, Path(build_dir), name, scripts, options, test_depends,
                                      lambda name=name: plan().get(name), on_progress, on_output))
        last = results[-1]
        on_progress(f"  {last.status}" + (f": {last.reason}" if last.reason else "")
                    + (f"\n    fix: {last.fix}" if last.fix else ""))
    if all(r.status == "skipped" for r in results):
        raise EnvironmentProblem(
            "nothing to benchmark on this machine: " + "; ".join(f"{r.variant} {r.reason}" for r in results),
            "run `publisher bench` where the variants' hardware is (a GPU machine for CUDA variants), "
            "or build a variant for this machine's torch (`publisher build --local`)")
    return file_results(build_dir, results)


def file_results(build_dir: Path, results: Sequence[VariantBench]) -> BenchRun:
    """Each result filed under its device (this machine's, or a remote job's), the device's plot redrawn."""
    files = tuple(dict.fromkeys(p for p in (record(build_dir, r) for r in results) if p is not None))
    plots = tuple(_plot(build_dir, path, built_variants(build_dir)) for path in files)
    return BenchRun(tuple(results), files, plots)


def run_project_benchmarks(options: BenchCommandOptions, on_progress: Sink = lambda line: None,
                           on_output: Sink | None = None) -> BenchRun:
    """`publisher bench`: the project at options.path, its variants in options.variants_dir."""
    return run_benchmarks(require_project(options.path), options.variants_dir, include=options.selection.include,
                          skip=options.selection.skip, options=options.bench, matrix_path=options.matrix_file,
                          on_progress=on_progress, on_output=on_output)


def _plot(build_dir: Path, results_file: Path, built: Sequence[str]) -> Path:
    """The device's plot beside its results file: every built variant's results that are not stale."""
    variants = {name: Path(build_dir) / name for name in built}
    svg = results_file.with_suffix(".svg")
    for device in current_results(build_dir, variants):
        if device.path == results_file:
            svg.write_text(plot.device_svg(device))
    return svg


def _stamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _fingerprint(variant_dir: Path) -> str | None:
    try:
        return state.variant_fingerprint(variant_dir)
    except OSError:
        return None


def _bench_variant(project: Project, build_dir: Path, name: str, scripts: list[Path], options: BenchOptions,
                   test_depends: Sequence[str], planned: Callable[[], PlannedVariant | None], on_progress: Sink,
                   on_output: Sink | None) -> VariantBench:
    variant_dir = build_dir / name
    started, stamp = time.monotonic(), _stamp()

    def result(status: str, **kw) -> VariantBench:
        return VariantBench(variant=name, status=status, fingerprint=_fingerprint(variant_dir), time=stamp,
                            scripts_sha256=scripts_digest(scripts), seconds=time.monotonic() - started, **kw)

    check = check_variant(variant_dir)
    if not check.ok:
        return result("error", reason="the variant folder is not a valid build: " + "; ".join(check.problems[:3]),
                      fix=f"rebuild it: publisher build {project.root} --variant {name}")
    variant = Variant.parse(name)
    missing = missing_accelerator(variant.backend, host_platform())
    if missing:
        return result("skipped", reason=missing)
    try:
        env = select_environment(variant, planned, lambda line: on_progress("    " + line), test_depends,
                                 kernel_depends(variant_dir, variant.backend))
    except (PublisherError, ToolchainUnavailable) as err:
        reason = getattr(err, "reason", None) or getattr(err, "message", str(err))
        return result("error", reason=f"no environment to run it in: {reason}", fix=getattr(err, "hint", None) or "")
    on_progress(f"  with {env.python} ({env.origin})")
    log = state.logs_dir(build_dir).resolve() / f"{name}.bench.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"# publisher bench {name} with {env.python} ({env.origin})\n")
    tmp = Path(tempfile.mkdtemp(prefix=f"publisher-bench-{name}-"))
    try:
        doc, run = _run_harness(tmp, project, variant, variant_dir, scripts, env, options, log, on_output)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return judge(doc, run, options, result, environment=f"{env.python} ({env.origin})", log=str(log))


def _run_harness(tmp: Path, project: Project, variant: Variant, variant_dir: Path, scripts: list[Path],
                 env: TestEnvironment, options: BenchOptions, log: Path, on_output: Sink | None
                 ) -> tuple[dict, runner.RunResult]:
    """The harness in a scratch folder where the variant is the only one `kernels` can find."""
    kernel_dir = tmp / project.extension_name
    kernel_dir.mkdir()
    (kernel_dir / variant.name).symlink_to(variant_dir.resolve(), target_is_directory=True)
    (tmp / "harness").mkdir()
    for file in HARNESS_FILES:
        shutil.copyfile(HERE / file, tmp / "harness" / file)
    assert project.root is not None
    out = tmp / "result.json"
    config = {"kernel_dir": str(kernel_dir), "backend": variant.backend, "project_root": str(project.root.resolve()),
              "scripts": [str(s.resolve()) for s in scripts], "warmup": options.warmup,
              "iterations": options.iterations, "out": str(out),
              "shown_as": {str(kernel_dir / variant.name): str(variant_dir.resolve())}}
    (tmp / "config.json").write_text(json.dumps(config))
    child_env = {k: v for k, v in os.environ.items() if k not in protocol.NAMES}
    child_env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    repo_id = options.repo_id or project.config.general.hub_repo_id
    if repo_id:  # a benchmark that loads the kernel itself (get_kernel) gets this variant too
        child_env["LOCAL_KERNELS"] = f"{repo_id}={kernel_dir}"
    hiding = hiding_for(variant, host_platform())
    if hiding is not None:  # a cpu variant runs as on a machine without an accelerator, as its tests did
        child_env.update(hiding.env)
    run = runner.run([env.python, str(tmp / "harness" / "harness.py"), str(tmp / "config.json")], cwd=tmp,
                     env=child_env, log=log, on_line=on_output, timeout=options.timeout)
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        doc = {}
    # the output names the variant's files by their build folder, which outlives this scratch folder
    run = replace(run, output=run.output.replace(str(kernel_dir / variant.name), str(variant_dir.resolve())))
    return doc if isinstance(doc, dict) else {}, run


def judge(doc: dict, run: runner.RunResult, options: BenchOptions, result: Callable[..., VariantBench],
          **kw) -> VariantBench:
    """The variant's result from what the harness recorded and how its process ended."""
    workloads = [w for w in doc.get("workloads") or [] if isinstance(w, dict)]
    problems = [p for p in doc.get("problems") or [] if isinstance(p, dict)]
    device = doc.get("device") if isinstance(doc.get("device"), dict) else {}
    tail = report.tail(run.output)
    method = doc.get("method") if isinstance(doc.get("method"), dict) else {}
    values = dict(device=device, workloads=tuple(workloads), problems=tuple(problems), output_tail=tail,
                  method=method, **kw)
    current = doc.get("current")
    if doc.get("state") != "done" and isinstance(current, dict):
        # the process ended inside a workload: that workload is the one that crashed or hung
        how = f"did not finish within {options.timeout:.0f} s (--timeout)" if run.timed_out else \
            f"ended the process ({_ending(run.returncode)})"
        workloads.append({**current, "status": "error", "error": {"message": how, "detail": _their_lines(run.output)}})
        values["workloads"] = tuple(workloads)
    if doc.get("state") == "skipped":
        return result("skipped", reason=str(doc.get("reason") or "its device is not available here"), **values)
    if doc.get("state") == "error":
        error = doc.get("error") or {}
        message = str(error.get("message") or "the harness failed")
        values["problems"] += ({"script": "kernels.get_local_kernel", "benchmark": None, "message": message,
                                "detail": str(error.get("detail") or "")},)
        return result("error", reason=message, **values)
    if doc.get("state") not in ("done", "running"):
        how = f"did not finish within {options.timeout:.0f} s" if run.timed_out else _ending(run.returncode)
        return result("error", reason=f"the benchmark process did not start its work ({how})",
                      fix="see the log for the output of the benchmark's interpreter", **values)
    failed = [w for w in workloads if w.get("status") == "failed"]
    broken = [w for w in workloads if w.get("status") not in TIMED and w.get("status") != "failed"]
    if failed:
        names = ", ".join(_workload_name(w) for w in failed)
        return result("failed", reason=f"output differs from the reference: {names}", **values)
    if doc.get("state") != "done" and not broken:
        how = f"did not finish within {options.timeout:.0f} s (--timeout)" if run.timed_out else \
            f"ended the process ({_ending(run.returncode)})"
        return result("error", reason=f"the benchmark process {how} between workloads", **values)
    if broken or problems:
        first = (broken[0].get("error") or {}).get("message", "") if broken else problems[0].get("message", "")
        where = _workload_name(broken[0]) if broken else problems[0].get("script", "")
        count = len(broken) + len(problems)
        return result("error", reason=f"{where}: {first}" + (f" (and {count - 1} more)" if count > 1 else ""), **values)
    if not workloads:
        return result("error", reason="no workload ran", **values)
    return result("ok", **values)


def _their_lines(output: str) -> str:
    """The end of the output of a process that died (the stack faulthandler printed), without the harness's frames."""
    ours = tuple(f"{os.sep}harness{os.sep}{name}" for name in HARNESS_FILES)
    return report.tail("\n".join(line for line in output.splitlines() if not any(o in line for o in ours)), lines=20)


def _workload_name(w: dict) -> str:
    return f"{w.get('benchmark', '?')}.{w.get('workload', '?')}"


def _ending(returncode: int) -> str:
    if returncode < 0:
        return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def scripts_digest(scripts: Sequence[Path]) -> str:
    """sha256 over the benchmark scripts, in order (as kernels benchmark identifies them)."""
    digest = hashlib.sha256()
    for script in scripts:
        digest.update(script.read_bytes())
    return digest.hexdigest()
