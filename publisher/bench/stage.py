"""The bench stage: each selected built variant that can run here (a cpu variant with the
machine's accelerators hidden, a GPU variant where its GPU is) runs the project's
benchmark scripts in a subprocess of its environment (bench/runner.py); the results go to
build/.publisher/bench/<device>.json, one file per device, so results from several GPUs
(remote jobs included) sit side by side. Entries carry the variant's fingerprint: a
rebuilt variant's old results are not shown."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from publisher import runner, state
from publisher.errors import PublisherError, ToolchainUnavailable, UsageError
from publisher.host import host_platform
from publisher.plan.variants import Variant
from publisher.project.load import require_project
from publisher.testing.accelerators import hiding_for
from publisher.testing.environment import select_environment
from publisher.testing.stage import built_variants, select_variants
from publisher.testing.test_depends import kernel_depends

Sink = Callable[[str], None]
RUNNER = Path(__file__).with_name("runner.py")


@dataclass(frozen=True)
class BenchOptions:
    path: Path
    include: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    warmup: int = 10
    iterations: int = 100
    timeout: float = 1800.0


@dataclass
class VariantBench:
    variant: str
    status: str  # measured | skipped | error
    reason: str = ""
    device: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    scripts: dict = field(default_factory=dict)


def bench_dir(build_dir: Path) -> Path:
    return state.state_dir(build_dir) / "bench"


def device_key(device: dict) -> str:
    name = device.get("gpu") or f"cpu-{device.get('platform', 'unknown')}"
    return re.sub(r"[^a-z0-9]+", "-", str(name).lower()).strip("-") or "device"


def scripts_of(root: Path) -> list[Path]:
    return sorted((root / "benchmarks").glob("benchmark*.py"))


def record(build_dir: Path, result: VariantBench, fingerprint: str) -> Path:
    """Merge one variant's results into its device's file."""
    folder = bench_dir(build_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{device_key(result.device)}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data["device"] = result.device
    data.setdefault("variants", {})[result.variant] = {
        "fingerprint": fingerprint, "rows": result.rows, "scripts": result.scripts,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path.write_text(json.dumps(data, indent=2, sort_keys=True))
    return path


def _gpu_here(python: str, env: dict) -> bool:
    probe = runner.run([python, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                       env=env, timeout=180)
    return probe.ok


def run_bench(options: BenchOptions, on_progress: Sink = lambda line: None) -> list[VariantBench]:
    project = require_project(options.path)
    build_dir = Path(options.path) / "build"
    scripts = scripts_of(project.root)
    if not scripts:
        raise UsageError(f"{project.root / 'benchmarks'}: no benchmark*.py scripts",
                         "add benchmarks/benchmark.py with kernels.benchmark.Benchmark classes "
                         "(the form `kernels benchmark` runs); `publisher init` writes one")
    names = built_variants(build_dir)
    if not names:
        raise UsageError(f"{build_dir}: no built variants", f"run `publisher build {project.root}` first")
    repo_id = project.config.general.hub_repo_id or f"local/{project.name}"
    results = []
    for name in select_variants(names, options.include, options.skip):
        variant = Variant.parse(name)
        on_progress(f"benchmarking {name}")
        try:
            env = select_environment(variant, lambda: None, lambda line: on_progress("    " + line), (),
                                     kernel_depends(build_dir / name, variant.backend))
        except (PublisherError, ToolchainUnavailable) as err:
            results.append(VariantBench(name, "skipped", f"no environment here: {getattr(err, 'message', err)}"))
            on_progress(f"  skipped: {results[-1].reason}")
            continue
        results.append(_bench_one(project, build_dir, name, variant, env.python, repo_id, scripts, options))
        last = results[-1]
        on_progress(f"  {last.status}" + (f": {last.reason}" if last.reason else f" ({len(last.rows)} workload(s))"))
        if last.status == "measured":
            record(build_dir, last, state.variant_fingerprint(build_dir / name))
    return results


def _bench_one(project, build_dir: Path, name: str, variant: Variant, python: str, repo_id: str,
               scripts: Sequence[Path], options: BenchOptions) -> VariantBench:
    tmp = Path(tempfile.mkdtemp(prefix=f"publisher-bench-{name}-"))
    try:
        kernels_dir = tmp / project.extension_name
        shutil.copytree(build_dir / name, kernels_dir / name)
        env = {k: v for k, v in os.environ.items()}
        env.update(LOCAL_KERNELS=f"{repo_id}={kernels_dir}", PYTHONDONTWRITEBYTECODE="1")
        hiding = hiding_for(variant, host_platform())
        if hiding is not None:
            env.update(hiding.env)
        elif not _gpu_here(python, env):
            return VariantBench(name, "skipped", f"no {variant.backend.upper()} device here: benchmark it where "
                                                 "its GPU is (or with --on)")
        out = tmp / "bench.json"
        done = runner.run([python, str(RUNNER), str(out), repo_id, str(project.config.general.version), str(options.warmup), str(options.iterations),
                           *map(str, scripts)], env=env, cwd=str(project.root), timeout=options.timeout)
        if not out.is_file():
            tail = "\n".join(done.output.strip().splitlines()[-5:])
            return VariantBench(name, "error", f"the benchmark run ended without results (exit {done.returncode}): {tail}")
        data = json.loads(out.read_text())
        errors = [r for r in data["rows"] if r.get("error")]
        status = "measured" if data["rows"] and not errors else ("error" if errors else "skipped")
        reason = "; ".join(f"{r['benchmark']}.{r['workload']}: {r['error']}" for r in errors[:3]) or (
            "" if data["rows"] else "; ".join(f"{k}: {v}" for k, v in data["scripts"].items()))
        return VariantBench(name, status, reason, data["device"], data["rows"], data["scripts"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def render_table(results: Sequence[VariantBench]) -> str:
    lines = []
    for r in results:
        lines.append(f"{r.variant}: {r.status}" + (f" ({r.reason})" if r.reason else ""))
        if r.rows:
            where = r.device.get("gpu") or r.device.get("cpu") or "CPU"
            lines.append(f"  on {where}, torch {r.device.get('torch')}")
            lines.append(f"  {'BENCHMARK':<24} {'WORKLOAD':<12} {'MEDIAN ms':>10} {'IQR ms':>8} {'REF ms':>9} "
                         f"{'SPEEDUP':>8} {'N':>5} VERIFIED")
            for row in r.rows:
                if row.get("error"):
                    lines.append(f"  {row['benchmark']:<24} {row['workload']:<12} error: {row['error']}")
                    continue
                ref = f"{row['reference_ms']:.4f}" if row.get("reference_ms") is not None else "-"
                speed = f"{row['speedup']:.2f}x" if row.get("speedup") else "-"
                ok = {True: "yes", False: "NO", None: "-"}[row.get("verified")]
                lines.append(f"  {row['benchmark']:<24} {row['workload']:<12} {row['median_ms']:>10.4f} "
                             f"{row['iqr_ms']:>8.4f} {ref:>9} {speed:>8} {row['n']:>5} {ok}")
    return "\n".join(lines)
