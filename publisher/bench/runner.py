"""Run a project's benchmark scripts against one variant. Standalone (stdlib, torch,
kernels): the bench stage runs it with the variant's interpreter, the variant being the
only one LOCAL_KERNELS shows `kernels` for the repo id.

    python runner.py OUT.json REPO_ID VERSION WARMUP ITERATIONS SCRIPT...

The scripts are those `kernels benchmark` runs: classes deriving from
kernels.benchmark.Benchmark, with `setup`/`setup_<w>`, `benchmark_<w>` and an optional
`verify_<w>` returning the reference output (compared with `self.out`, as upstream does).

Timing, as a user's code meets the kernel: each call launched from Python on the current
stream (CUDA: events around each call; CPU: perf_counter); the tensors `setup` made are
rotated over enough copies that together they exceed the GPU's L2 cache several times, so
no call finds its inputs cached from the call before. The reference (`verify_<w>`) is timed
the same way, on the same rotation."""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROTATE_BYTES_CUDA_FALLBACK = 50 * 2**20  # an L2 size, when torch does not say
MAX_COPIES = 64


def _device_info(torch, device: str) -> dict:
    info = {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
            "platform": f"{platform.machine()}-{platform.system().lower()}"}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, capability=f"{props.major}.{props.minor}")
    else:
        info.update(gpu=None, cpu=platform.processor() or platform.machine())
    return info


def _tensors(instance, torch) -> dict:
    return {k: v for k, v in vars(instance).items() if torch.is_tensor(v)}


def _stats(ms: list[float]) -> dict:
    s = sorted(ms)
    q = statistics.quantiles(s, n=4) if len(s) >= 4 else [s[0], statistics.median(s), s[-1]]
    return {"n": len(s), "median_ms": statistics.median(s), "mean_ms": statistics.fmean(s),
            "std_ms": statistics.pstdev(s), "min_ms": s[0], "max_ms": s[-1], "iqr_ms": q[2] - q[0]}


def _timed(fn, instance, sets: list[dict], device: str, torch, warmup: int, iterations: int) -> list[float]:
    def use(i: int) -> None:
        for name, value in sets[i % len(sets)].items():
            setattr(instance, name, value)

    for i in range(warmup):
        use(i)
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
        pairs = []
        for i in range(iterations):
            use(i)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in pairs]
    times = []
    for i in range(iterations):
        use(i)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _copies(instance, torch, device: str) -> list[dict]:
    originals = _tensors(instance, torch)
    size = sum(t.numel() * t.element_size() for t in originals.values()) or 1
    if device == "cuda":
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or ROTATE_BYTES_CUDA_FALLBACK
        count = min(MAX_COPIES, max(1, math.ceil(4 * l2 / size)))
    else:
        count = min(MAX_COPIES, max(1, math.ceil(64 * 2**20 / size)))
    return [originals] + [{k: v.clone() for k, v in originals.items()} for _ in range(count - 1)]


def run_class(cls, kernel, device: str, torch, warmup: int, iterations: int) -> list[dict]:
    out = []
    for name in sorted(n for n in dir(cls) if n.startswith("benchmark_") and callable(getattr(cls, n))):
        workload = name[len("benchmark_"):]
        row = {"benchmark": cls.__name__, "workload": workload}
        try:
            instance = cls()
            instance.kernel, instance.device = kernel, device
            if getattr(instance, "seed", None) is not None:
                torch.manual_seed(instance.seed)
            (getattr(instance, f"setup_{workload}", None) or instance.setup)()
            fn, verify = getattr(instance, name), getattr(instance, f"verify_{workload}", None)
            if verify is not None:
                fn()
                reference = verify()
                ok = bool(torch.allclose(instance.out, reference, atol=1e-2)) if torch.is_tensor(reference) else None
                row["verified"] = ok
                if ok is False:
                    diff = (instance.out.float() - reference.float()).abs().max().item()
                    row["error"] = f"verify_{workload}: the kernel's output differs from the reference (max |diff| {diff:.3g})"
                    out.append(row)
                    continue
            sets = _copies(instance, torch, device)
            row["copies"] = len(sets)
            row.update(_stats(_timed(fn, instance, sets, device, torch, warmup, iterations)))
            if verify is not None:
                ref = _stats(_timed(verify, instance, sets, device, torch, warmup, iterations))
                row["reference_ms"] = ref["median_ms"]
                row["speedup"] = ref["median_ms"] / row["median_ms"] if row["median_ms"] else None
        except Exception as err:  # noqa: BLE001 - one workload's failure is reported, the others run
            row["error"] = f"{type(err).__name__}: {err}"
            row["traceback"] = traceback.format_exc()[-2000:]
        out.append(row)
    return out


def main(argv: list[str]) -> int:
    out_path, repo_id, version, warmup, iterations, *scripts = argv
    import torch
    from kernels import get_kernel
    from kernels.benchmark import Benchmark

    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = {"device": _device_info(torch, device), "scripts": {}, "rows": []}
    kernel = get_kernel(repo_id, version=int(version))
    for script in scripts:
        path = Path(script)
        try:
            spec = importlib.util.spec_from_file_location(f"publisher_bench_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        except BaseException as err:  # noqa: BLE001 - a script that does not import is reported
            result["scripts"][path.name] = f"does not import: {type(err).__name__}: {err}"
            continue
        classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, Benchmark) and c is not Benchmark and c.__module__ == spec.name]
        if not classes:
            result["scripts"][path.name] = "no Benchmark subclass (not in the form `kernels benchmark` runs): skipped"
            continue
        result["scripts"][path.name] = f"{len(classes)} benchmark class(es)"
        for cls in classes:
            result["rows"] += [dict(r, script=path.name) for r in run_class(cls, kernel, device, torch,
                                                                             int(warmup), int(iterations))]
    Path(out_path).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
