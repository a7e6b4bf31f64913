"""Runs a project's benchmarks/benchmark*.py against one built variant, in the
form `kernels benchmark` runs them: each script's subclasses of
`kernels.benchmark.Benchmark`; per `benchmark_<workload>` method a fresh
instance with `kernel` (the variant, loaded with kernels.get_local_kernel) and
`device` set, the class's `seed` applied, then `setup_<workload>` (or `setup`);
where `verify_<workload>` exists, the output it leaves in `self.out` must match
the reference that method returns (torch.allclose, atol 1e-2), and that
reference is timed beside the kernel. Timing: timing.py.

What a benchmark does wrong (a script that does not import, a setup that
raises, an output that does not match) is recorded for that benchmark and the
others go on; the result file is rewritten after every workload, so a process
that dies leaves what it finished and the workload it was in.

Standalone (stdlib, torch, kernels): the bench stage copies this file and
timing.py into a scratch folder and runs them with the variant's interpreter,
which need not have publisher installed.

    python harness.py CONFIG.json

CONFIG (JSON): kernel_dir (holds the variant's folder, and nothing else),
backend (the variant's), project_root, scripts (paths), warmup, iterations,
out (the result file), shown_as (scratch path -> the path tracebacks show)."""

from __future__ import annotations

import ast
import faulthandler
import gc
import importlib.util
import inspect
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import timing

ATOL = 1e-2  # kernels benchmark's tolerance (torch.allclose(out, reference, atol=1e-2))
OURS = {str(Path(__file__).resolve()), str(Path(timing.__file__).resolve())}
DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "metal": "mps", "cpu": "cpu"}  # variant backend -> torch device
REFERENCE_CHARS = 120
SHOWN_AS: dict[str, str] = {}  # scratch folder -> the folder a user knows it as (the variant's build folder)


class Recorder:
    """The result document, written (atomically) after every change."""

    def __init__(self, path: Path):
        self.path = path
        self.doc: dict = {"state": "starting", "device": {}, "kernel": None, "current": None, "workloads": [],
                          "problems": []}
        self.save()

    def save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1, default=str))
        os.replace(tmp, self.path)

    def update(self, **values) -> None:
        self.doc.update(values)
        self.save()

    def problem(self, script: str, message: str, detail: str = "", benchmark: str | None = None) -> None:
        self.doc["problems"].append({"script": script, "benchmark": benchmark, "message": message, "detail": detail})
        print(f"  {script}{'::' + benchmark if benchmark else ''}: {message}", flush=True)
        self.save()

    def workload(self, entry: dict) -> None:
        self.doc["workloads"].append(entry)
        self.doc["current"] = None
        self.save()


def their_traceback(err: BaseException) -> str:
    """The exception with the frames of the benchmark and the kernel, not this harness's."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if str(Path(f.filename).resolve()) not in OURS
              and not f.filename.startswith("<frozen importlib")]
    for frame in frames:
        for scratch, known in SHOWN_AS.items():
            if frame.filename.startswith(scratch + os.sep):
                frame.filename = known + frame.filename[len(scratch):]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(err), err)
    return "".join(lines).rstrip()[-4000:]


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300]}" if text else type(err).__name__


def _driver() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0].strip() if out else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_device(torch, device: str) -> dict:
    """The device the workloads run on, and the software around it."""
    info = {"kind": device, "name": None, "torch": torch.__version__, "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None), "python": platform.python_version(),
            "platform": f"{platform.machine()}-{platform.system().lower()}", "cpu": cpu_model(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(name=torch.cuda.get_device_name(0), capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1), sms=props.multi_processor_count,
                    cache_bytes=int(getattr(props, "L2_cache_size", 0) or 0), driver=_driver())
    elif device == "xpu":
        info.update(name=torch.xpu.get_device_name(0))
    elif device == "mps":
        info.update(name=f"Apple MPS ({info['cpu']})")
    else:
        info.update(name=info["cpu"], cache_bytes=timing.cpu_cache_bytes())
    return info


def device_missing(torch, device: str) -> str | None:
    """Why `device` cannot run here (None when it can)."""
    if device == "cuda" and not torch.cuda.is_available():
        kind = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
        return f"no {kind} device visible to torch {torch.__version__}"
    if device == "xpu" and not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        return f"no XPU device visible to torch {torch.__version__}"
    if device == "mps" and not torch.backends.mps.is_available():
        return f"no MPS device visible to torch {torch.__version__}"
    return None


def pick_device(torch, backend: str) -> str:
    if backend in DEVICES:
        return DEVICES[backend]
    # a Python-only universal variant runs on what this torch has
    if torch.cuda.is_available():
        return "cuda"
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def discover(script: Path, project_root: Path, base: type) -> list[type]:
    """The Benchmark subclasses the script itself defines (imported ones are not its own)."""
    name = f"publisher_benchmark_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {script}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    before = os.getcwd()
    os.chdir(project_root)  # as kernels benchmark imports it: from the kernel's folder
    try:
        spec.loader.exec_module(module)
    finally:
        os.chdir(before)
    return [obj for _, obj in sorted(vars(module).items()) if isinstance(obj, type) and issubclass(obj, base)
            and obj is not base and obj.__module__ == name]


def workloads_of(cls: type) -> list[str]:
    return [name[len("benchmark_"):] for name in dir(cls)
            if name.startswith("benchmark_") and callable(getattr(cls, name))]


def reference_source(fn) -> str | None:
    """What verify_<workload> returns, as written (`F.rms_norm(self.x, ...)`), when it says it in one return."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    returns = [node for node in ast.walk(tree) if isinstance(node, ast.Return) and node.value is not None]
    if len(returns) != 1:
        return None
    text = " ".join(ast.unparse(returns[0].value).split())
    return text if len(text) <= REFERENCE_CHARS else text[: REFERENCE_CHARS - 3] + "..."


class Workload:
    """One benchmark_<name> of one class, on fresh instances."""

    def __init__(self, torch, cls: type, name: str, kernel, device: str):
        self.torch, self.cls, self.name, self.kernel, self.device = torch, cls, name, kernel, device

    def instance(self):
        """A fresh instance, set up as kernels benchmark sets one up."""
        torch = self.torch
        obj = self.cls()
        obj.kernel = self.kernel
        obj.device = self.device
        if obj.seed is not None:
            torch.manual_seed(obj.seed)
            random.seed(obj.seed)
            if torch.cuda.is_available():
                torch.cuda.manual_seed_all(obj.seed)
        setup = getattr(obj, f"setup_{self.name}", None)
        (setup if setup is not None else obj.setup)()
        return obj

    def footprint(self, obj) -> int:
        """Bytes of the tensors the instance holds (each storage once)."""
        seen, total = set(), 0
        for value in vars(obj).values():
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
            for item in items:
                if isinstance(item, self.torch.Tensor):
                    storage = item.untyped_storage()
                    if storage.data_ptr() not in seen:
                        seen.add(storage.data_ptr())
                        total += storage.nbytes()
        return total


class NotComparable(Exception):
    """The benchmark gives nothing to compare (no tensor in self.out, a reference of another shape):
    its own mistake, not the kernel's."""


def compare(torch, out, reference, workload: str) -> dict:
    """kernels benchmark's check (torch.allclose(out, reference, atol=1e-2)), and by how much it is off."""
    if not isinstance(reference, torch.Tensor):
        raise NotComparable(f"verify_{workload} returned {type(reference).__name__}, not a tensor (it must return "
                            "the reference output)")
    if not isinstance(out, torch.Tensor):
        raise NotComparable(f"self.out is {type(out).__name__} after benchmark_{workload}, not a tensor (the "
                            "benchmark method must leave the kernel's output in self.out)")
    try:
        match = bool(torch.allclose(out, reference, atol=ATOL))
    except RuntimeError as err:
        raise NotComparable(f"self.out ({out.dtype}, {tuple(out.shape)}) cannot be compared with the reference "
                            f"({reference.dtype}, {tuple(reference.shape)}): {one_line(err)}") from None
    result = {"match": match, "detail": ""}
    try:
        diff = (out.detach().double() - reference.detach().double()).abs()
        result["max_abs_diff"] = float(diff.max()) if diff.numel() else 0.0
    except RuntimeError:
        pass
    if not match:
        result["detail"] = (f"self.out differs from the reference by up to {result.get('max_abs_diff', float('nan')):.4g} "
                            f"(allowed: {ATOL} + 1e-05 x |reference|)")
    return result


def run_workload(torch, work: Workload, clock, config: dict, cache_bytes: int) -> dict:
    """Verify on one instance, then time the kernel (and the reference) over rotated copies."""
    entry: dict = {"status": "error", "kernel": None, "reference": None, "speedup": None, "verify": None,
                   "reference_source": None, "copies": 1, "footprint_bytes": 0, "rotation_bytes": 0, "error": None}
    first = work.instance()
    verify_name = f"verify_{work.name}"
    has_verify = callable(getattr(first, verify_name, None))
    if has_verify:
        getattr(first, f"benchmark_{work.name}")()
        clock.sync()
        reference = getattr(first, verify_name)()
        clock.sync()
        entry["verify"] = compare(torch, first.out, reference, work.name)
        entry["reference_source"] = reference_source(getattr(work.cls, verify_name))
        del reference
        if not entry["verify"]["match"]:
            entry["status"] = "failed"
            return entry
    footprint = work.footprint(first)
    free = torch.cuda.mem_get_info()[0] if work.device == "cuda" else timing.free_cpu_memory() \
        if work.device == "cpu" else None
    wanted, copies = timing.copies_for(footprint, cache_bytes, free), [first]
    started = time.perf_counter()
    while len(copies) < wanted and time.perf_counter() - started < timing.SETUP_BUDGET_S:
        copies.append(work.instance())
    entry.update(copies=len(copies), footprint_bytes=footprint, rotation_bytes=footprint * len(copies))
    contenders = {"kernel": timing.Rotation([getattr(c, f"benchmark_{work.name}") for c in copies])}
    if has_verify:
        contenders["reference"] = timing.Rotation([getattr(c, verify_name) for c in copies])
    timed = timing.time_contenders(contenders, clock, config["warmup"], config["iterations"])
    entry.update(status="verified" if has_verify else "unverified", kernel=timed["kernel"],
                 reference=timed.get("reference"))
    if entry["reference"] and timed["kernel"]["median_ms"] > 0:
        entry["speedup"] = entry["reference"]["median_ms"] / timed["kernel"]["median_ms"]
    return entry


def context_broken(torch, device: str) -> str | None:
    """After an error on a GPU: whether the device still works (an illegal access poisons the context)."""
    if device != "cuda":
        return None
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").add_(1).item()
    except Exception as err:  # noqa: BLE001 - whatever the runtime raises, the context is unusable
        return one_line(err)
    return None


def describe(entry: dict) -> str:
    if entry["status"] in ("verified", "unverified"):
        k = entry["kernel"]
        text = f"{k['median_ms']:.4f} ms (IQR {k['iqr_ms']:.4f}, {k['samples']} x {k['calls_per_sample']} calls)"
        if entry["reference"]:
            text += f", reference {entry['reference']['median_ms']:.4f} ms, {entry['speedup']:.2f}x"
        return text + (", matches the reference" if entry["status"] == "verified" else ", no verify method")
    if entry["status"] == "failed":
        return "FAILED: " + entry["verify"]["detail"]
    return f"{entry['status']}: " + (entry.get("error") or {}).get("message", "")


def run(config: dict) -> int:
    recorder = Recorder(Path(config["out"]))
    SHOWN_AS.update(config.get("shown_as") or {})
    try:
        import torch
        from kernels import get_local_kernel
        from kernels.benchmark import Benchmark
    except Exception as err:  # noqa: BLE001 - reported as what it is, in the result file
        recorder.update(state="error", error={"message": f"cannot import torch and kernels: {one_line(err)}",
                                              "detail": their_traceback(err)})
        return 0
    device = pick_device(torch, config["backend"])
    missing = device_missing(torch, device)
    if missing:
        recorder.update(state="skipped", reason=missing, device=describe_device(torch, "cpu"))
        return 0
    recorder.update(device=describe_device(torch, device))
    try:
        kernel = get_local_kernel(Path(config["kernel_dir"]), backend="cpu" if device == "cpu" else None)
    except Exception as err:  # noqa: BLE001
        recorder.update(state="error", error={"message": f"the variant does not load: {one_line(err)}",
                                              "detail": their_traceback(err)})
        return 0
    recorder.update(kernel=getattr(kernel, "__name__", None), state="running")
    clock = timing.clock_for(torch, device)
    cache_bytes = recorder.doc["device"].get("cache_bytes") or 0
    recorder.update(method={"clock": clock.name, "sample_ms": timing.TARGET_MS, "cache_multiple": timing.CACHE_MULTIPLE,
                            "warmup": config["warmup"], "iterations": config["iterations"]})
    root = Path(config["project_root"])
    broken = None
    for script in map(Path, config["scripts"]):
        rel = script.relative_to(root).as_posix() if script.is_relative_to(root) else str(script)
        print(f"{rel}", flush=True)
        try:
            classes = discover(script, root, Benchmark)
        except BaseException as err:  # noqa: BLE001 - a script that exits or raises on import
            if isinstance(err, KeyboardInterrupt):
                raise
            recorder.problem(rel, f"does not import: {one_line(err)}", their_traceback(err))
            continue
        if not classes:
            recorder.problem(rel, "defines no subclass of kernels.benchmark.Benchmark (`kernels benchmark` refuses "
                                  "such a script)")
        for cls in classes:
            names = workloads_of(cls)
            if not names:
                recorder.problem(rel, "has no benchmark_<workload> method", benchmark=cls.__name__)
            for name in names:
                base = {"script": rel, "benchmark": cls.__name__, "workload": name}
                if broken:
                    recorder.workload({**base, "status": "not-run", "error": {
                        "message": f"not run: the device failed earlier ({broken})", "detail": ""}})
                    continue
                recorder.update(current=base)
                try:
                    entry = run_workload(torch, Workload(torch, cls, name, kernel, device), clock, config, cache_bytes)
                except NotComparable as err:
                    entry = {"status": "error", "error": {"message": str(err), "detail": ""}}
                except BaseException as err:  # noqa: BLE001 - the benchmark's failure is its result
                    if isinstance(err, KeyboardInterrupt):
                        raise
                    entry = {"status": "error", "error": {"message": one_line(err), "detail": their_traceback(err)}}
                    broken = context_broken(torch, device)
                entry = {**base, **entry}
                print(f"  {cls.__name__}.{name}: {describe(entry)}", flush=True)
                recorder.workload(entry)
                gc.collect()
                if device == "cuda" and not broken:
                    torch.cuda.empty_cache()
    recorder.update(state="done", current=None)
    return 0


if __name__ == "__main__":
    faulthandler.enable()  # a workload that kills the process (segfault, abort) leaves its Python stack in the log
    sys.exit(run(json.loads(Path(sys.argv[1]).read_text())))
