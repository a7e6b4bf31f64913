#!/usr/bin/env python3
"""Does an adopted kernel compute what the original extension computed? For
each project of a bundle folder, on one machine: build the ORIGINAL extension
its own way (its setup.py: `python setup.py build_ext --inplace`; or the
project's own torch.utils.cpp_extension.load() call), build the ADOPTED
project with `publisher build --local`, call each op of both on the same
random inputs, and print a table of max abs / max rel differences of every
output and of every tensor argument after the call (ops that write into
their arguments are compared on those).

    python3 scripts/adopt_equivalence.py prepare --bundle DIR NAME=ORIGINAL:ADOPTED[:INPUTS.py] ...
        fill DIR (here, with PyPI): projects/<NAME>/{original,adopted,inputs.py} and whl/ (the wheels
        the GPU machine lacks, for --python-version)
    python3 scripts/adopt_equivalence.py run --bundle DIR [--only NAME ...] [--device cuda|cpu]
            [--jobs N] [--arch native|as-written] [--budget SECONDS]
        on the machine that runs the kernels (no network needed): builds every project (N at a time),
        compares, prints the table, writes $OUT/adopt-equivalence.json (and the build logs) when OUT is
        set; exit 0 when every op matched, 1 otherwise. --arch native (the default) compiles both sides
        for this GPU's capability only (TORCH_CUDA_ARCH_LIST for the original, cuda-capabilities in the
        adopted copy's build.toml): the same code the full fat binaries would run here, in a fraction of
        the time; a setup.py that names its own -gencode list still compiles all of it. --budget stops
        starting builds past that many seconds (what did not build is a row, the table still prints).

inputs.py (one per project) defines INPUTS = {op: lambda device: (args...)}, and optionally
NAMES = {op: name in the original module}, TOLERANCE = {op: (rtol, atol)}, MODULE = the original
module's import name (default: what adopt finds), MODULES = {device: module} where the original has
one module per device (torchsort: isotonic_cpu, isotonic_cuda), DEVICE = "cpu" for a CPU extension,
DEVICES = ["cuda", "cpu"] to compare on several devices, ORIGINAL = lambda root, device: the object whose
attributes are the original's ops, for an original that registers torch ops itself (TORCH_LIBRARY,
RegisterOperators: `torch.ops.<its namespace>` once its library is loaded from the built tree at `root`),
ORIGINAL_ENV = {name: value} for the original's build (FORCE_ONLY_CUDA=1: only the libraries compared),
BACKEND = the adopted variant to load where it is not the device's ("cuda" for a CUDAExtension whose ops are
CPU code: GeoTransformer), and REFERENCE = lambda device: an object whose attributes compute each op, compared
with instead where the original no longer builds (a THC-era extension on a torch without THC).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GPU_MATRIX = ROOT / "matrices" / "gpu-runner-torch211-cu130.yaml"
# what the GPU machine lacks for `publisher build` and kernels' loader (see scripts/gpu_test.sh)
WHEELS = ("kernels==0.17.2", "tomlkit==0.15.2", "kernel-abi-check", "wheel", "packaging",
          # the GPU machine has huggingface_hub 1.x only; publisher needs 2.x and its HTTP client
          "huggingface_hub>=2", "httpx2", "httpcore2", "hf_xet", "truststore", "click")


# --- prepare (here) ---------------------------------------------------------------------------------

def prepare(args) -> int:
    bundle = Path(args.bundle)
    (bundle / "projects").mkdir(parents=True, exist_ok=True)
    for spec in args.pairs:
        name, _, paths = spec.partition("=")
        parts = paths.split(":")
        if not name or len(parts) < 2:
            print(f"bad pair {spec!r}: NAME=ORIGINAL:ADOPTED[:INPUTS.py]", file=sys.stderr)
            return 2
        dest = bundle / "projects" / name
        shutil.rmtree(dest, ignore_errors=True)
        ignore = shutil.ignore_patterns(".git", "build", "__pycache__", "*.so", "*.egg-info", "dist", "*.png", "*.jpg", "*.gif", "*.mp4")
        shutil.copytree(parts[0], dest / "original", ignore=ignore)
        shutil.copytree(parts[1], dest / "adopted", ignore=ignore)
        if len(parts) > 2:
            shutil.copy(parts[2], dest / "inputs.py")
        print(f"{name}: {parts[0]} / {parts[1]}")
    whl = bundle / "whl"
    whl.mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
           "--python-version", args.python_version, "--implementation", "cp",
           "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux2014_x86_64", "-d", str(whl), *WHEELS]
    subprocess.run(cmd, check=True)
    print(f"bundle folder ready: {bundle} ({_size(bundle) / 1e6:.1f} MB)")
    return 0


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --- run (on the machine with the device) ------------------------------------------------------------

def run(args) -> int:
    bundle = Path(args.bundle).resolve()
    sys.path.insert(0, str(ROOT))
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    started = time.monotonic()
    _install_wheels(bundle)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    arch = None
    if device == "cuda" and args.arch == "native":
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}.{minor}"
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), device {device}"
          + (f": {torch.cuda.get_device_name()}, builds for {arch or 'what each project names'}"
             if device == "cuda" else ""), flush=True)
    projects = sorted(p for p in (bundle / "projects").iterdir() if p.is_dir())
    if args.only:
        projects = [p for p in projects if p.name in args.only]
    work = Path(tempfile.mkdtemp(prefix="adopt-equivalence-"))
    deadline = started + args.budget
    jobs = max(1, args.jobs)
    cores = max(1, (os.cpu_count() or 4) // jobs)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        builds = {p.name: pool.submit(_build_both, p, work / p.name, device, arch, out, deadline, cores)
                  for p in projects}
        rows: list[dict] = []
        for project in projects:
            print(f"\n== {project.name}", flush=True)
            try:
                built = builds[project.name].result()
                rows += _compare_project(project, built, device)
            except Exception as err:  # noqa: BLE001 - one project's failure is a row, the others still run
                traceback.print_exc()
                rows.append({"project": project.name, "op": "-", "result": f"error: {type(err).__name__}: {err}"[:300]})
    print(f"\nall projects: {time.monotonic() - started:.0f} s", flush=True)
    _print_table(rows)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "adopt-equivalence.json").write_text(json.dumps({"device": device, "torch": torch.__version__,
                                                                "arch": arch, "rows": rows}, indent=2))
    return 0 if rows and all(r["result"] in ("identical", "close") for r in rows) else 1


def _install_wheels(bundle: Path) -> Path | None:
    wheels = sorted((bundle / "whl").glob("*.whl")) if (bundle / "whl").is_dir() else []
    if not wheels:
        return None
    site = Path(tempfile.mkdtemp(prefix="adopt-equivalence-site-"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--target", str(site), *map(str, wheels)], check=True)
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return site


def _build_both(project: Path, work: Path, device: str, arch: str | None, out: Path | None, deadline: float,
                cores: int) -> dict:
    """Build the original and the adopted copy of one project (a worker thread); the modules are loaded later."""
    inputs = _load_inputs(project / "inputs.py")
    shutil.rmtree(work, ignore_errors=True)
    original, adopted = work / "original", work / "adopted"
    shutil.copytree(project / "original", original)
    shutil.copytree(project / "adopted", adopted)
    env = {**os.environ, "MAX_JOBS": str(cores)}
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
        _narrow_capabilities(adopted / "build.toml", arch)
    built = {"inputs": inputs, "work": work}
    try:
        built["original"] = _build_original(original, work, out, project.name,
                                            {**env, **getattr(inputs, "ORIGINAL_ENV", {})}, deadline)
    except (RuntimeError, TimeoutError) as err:
        if not hasattr(inputs, "REFERENCE"):
            raise
        print(f"   {project.name} original did not build: compared with REFERENCE instead\n{err}", flush=True)
        built["original"] = None
    built["adopted"] = _build_adopted(adopted, out, project.name, env, deadline)
    return built


def _narrow_capabilities(toml: Path, arch: str) -> None:
    import tomlkit

    doc = tomlkit.parse(toml.read_text())
    for kernel in (doc.get("kernel") or {}).values():
        if kernel.get("backend") == "cuda":
            kernel["cuda-capabilities"] = [arch]
    toml.write_text(tomlkit.dumps(doc))


def _compare_project(project: Path, built: dict, device: str) -> list[dict]:
    inputs = built["inputs"]
    devices = list(getattr(inputs, "DEVICES", [getattr(inputs, "DEVICE", device)]))
    ops_ns = _load_adopted(built["adopted"], project.name, devices, getattr(inputs, "BACKEND", None))
    names = getattr(inputs, "NAMES", {})
    tolerance = getattr(inputs, "TOLERANCE", {})
    rows = []
    for dev in devices:
        if built["original"] is None:  # the original no longer builds: the project's reference computes each op
            module = inputs.REFERENCE(dev)
        elif hasattr(inputs, "ORIGINAL"):  # ops the original registers itself (TORCH_LIBRARY, RegisterOperators)
            module = inputs.ORIGINAL(built["original"]["root"], dev)
        else:
            module = _load_original(built["original"],
                                    getattr(inputs, "MODULES", {}).get(dev, getattr(inputs, "MODULE", None)))
        for op, make in inputs.INPUTS.items():
            row = {"project": project.name, "op": (op if len(devices) == 1 else f"{op} [{dev}]")
                   + (" vs REFERENCE" if built["original"] is None else "")}
            try:
                row.update(_compare_op(getattr(module, names.get(op, op)), getattr(ops_ns, op), make, dev,
                                       tolerance.get(op, (1e-5, 1e-6))))
            except Exception as err:  # noqa: BLE001 - shown in the table
                row["result"] = f"error: {type(err).__name__}: {err}"[:300]
            print(f"   {row['op']}: {row['result']}", flush=True)
            rows.append(row)
    return rows


def _load_inputs(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: it defines INPUTS = {{op: lambda device: (args...)}}")
    spec = importlib.util.spec_from_file_location(f"adopt_inputs_{path.parent.name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _log(out: Path | None, name: str, text: str) -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with (out / f"{name}.log").open("a") as fh:
            fh.write(text)


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 5:
        raise TimeoutError("not built: the time budget (--budget) was spent")
    return left


def _build_original(root: Path, work: Path, out: Path | None, name: str, env: dict, deadline: float) -> dict:
    """The original extension, built as its author builds it (its setup.py, or its own load() call)."""
    from publisher.adopt.discover import discover

    found = discover(root)
    started = time.monotonic()
    if found.route == "setup.py":
        try:
            result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, capture_output=True,
                                    text=True, env=env, timeout=_remaining(deadline))
        except subprocess.TimeoutExpired:
            raise TimeoutError("original: setup.py build_ext still running when the time budget was spent") from None
        _log(out, f"{name}-original-build", result.stdout + result.stderr)
        if result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"original: setup.py build_ext --inplace failed:\n{tail}")
        print(f"   {name} original: setup.py build_ext --inplace ({time.monotonic() - started:.0f} s)", flush=True)
        return {"route": "setup.py", "root": root, "module": found.extensions[0].module,
                "modules": [e.module for e in found.extensions]}
    ext = found.extensions[0]
    build_dir = work / f"jit-{ext.leaf}"
    build_dir.mkdir(parents=True, exist_ok=True)
    # the project's own load() call, made in a child process (a build per thread; torch's loader is not thread-safe)
    script = (f"import sys, torch\nfrom torch.utils.cpp_extension import load\n"
              f"load(name={ext.leaf!r}, sources={[str(root / s) for s in ext.sources]!r}, "
              f"extra_cflags={list(ext.cxx_flags)!r}, extra_cuda_cflags={list(ext.nvcc_flags)!r}, "
              f"extra_include_paths={[str(root / i) for i in ext.include_dirs]!r}, build_directory={str(build_dir)!r})\n")
    if ext.inline_sources:  # load_inline(): its strings, as the project's call gives them
        texts = dict(ext.inline_sources)
        cpp = next(t for p, t in texts.items() if p.endswith(".cpp"))
        cuda = [t for p, t in texts.items() if not p.endswith(".cpp")]
        script = (f"import sys, torch\nfrom torch.utils.cpp_extension import load_inline\n"
                  f"load_inline(name={ext.leaf!r}, cpp_sources=[{cpp!r}], cuda_sources={cuda!r}, "
                  f"functions={[f for f, _ in ext.inline_functions]!r}, extra_cflags={list(ext.cxx_flags)!r}, "
                  f"extra_cuda_cflags={list(ext.nvcc_flags)!r}, build_directory={str(build_dir)!r})\n")
    try:
        result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                                timeout=_remaining(deadline))
    except subprocess.TimeoutExpired:
        raise TimeoutError("original: load() still compiling when the time budget was spent") from None
    _log(out, f"{name}-original-build", result.stdout + result.stderr)
    if result.returncode != 0:
        raise RuntimeError("original: its load() call failed:\n" + "\n".join(result.stderr.strip().splitlines()[-15:]))
    print(f"   {name} original: its own load(name={ext.leaf!r}) ({time.monotonic() - started:.0f} s)", flush=True)
    return {"route": "load()", "leaf": ext.leaf, "build_dir": build_dir, "module": ext.leaf}


def _load_original(built: dict, module_name: str | None):
    import torch  # noqa: F401 - the extension's symbols come from torch's libraries

    if built["route"] == "setup.py":
        return _import_built(built["root"], module_name or built["module"])
    (so,) = list(built["build_dir"].glob(f"{built['leaf']}*.so"))
    spec = importlib.util.spec_from_file_location(built["leaf"], so)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def _import_built(root: Path, module: str):
    if module in sys.modules:
        return sys.modules[module]
    leaf = module.rsplit(".", 1)[-1]
    package = module.rsplit(".", 1)[0].replace(".", "/") if "." in module else ""
    found = [p for p in root.rglob(f"{leaf}*.so") if not package or p.parent.as_posix().endswith(package)]
    if not found:
        raise FileNotFoundError(f"no {leaf}*.so under {root} after the build")
    spec = importlib.util.spec_from_file_location(module, found[0])
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    sys.modules[module] = loaded
    return loaded


def _build_adopted(root: Path, out: Path | None, name: str, env: dict, deadline: float) -> Path:
    """The adopted project built with publisher for this torch (--local: this torch's variant and its cpu one)."""
    import torch

    started = time.monotonic()
    cmd = [sys.executable, "-m", "publisher", "build", str(root), "--local"]
    if GPU_MATRIX.is_file() and torch.version.cuda:
        cmd += ["--matrix", str(GPU_MATRIX)]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=_remaining(deadline),
                                env={**env, "PYTHONPATH": env.get("PYTHONPATH", str(ROOT))})
    except subprocess.TimeoutExpired:
        raise TimeoutError("adopted: publisher build still running when the time budget was spent") from None
    _log(out, f"{name}-adopted-build", result.stdout + result.stderr)
    logs = sorted((root / "build" / ".publisher" / "logs").glob("*.log")) if (root / "build").is_dir() else []
    for log in logs:
        _log(out, f"{name}-adopted-build", f"\n--- {log.name}\n" + log.read_text(errors="replace")[-20000:])
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"adopted: publisher build --local failed:\n{tail}")
    print(f"   {name} adopted: publisher build --local ({time.monotonic() - started:.0f} s)", flush=True)
    return root


def _load_adopted(root: Path, name: str, devices: list[str], backend: str | None = None):
    """The built variant, loaded as users load it (kernels); its torch.ops namespace."""
    import kernels
    import torch

    module = kernels.get_local_kernel(root, backend=backend or ("cpu" if devices == ["cpu"] else None))
    variant = Path(module.__file__).parent
    ops_id = json.loads((variant / "metadata.json").read_text())["id"]
    print(f"   adopted: loaded {variant.name} ({ops_id})", flush=True)
    return getattr(torch.ops, ops_id)


def _clone(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _compare_op(original, adopted, make, device: str, tolerance) -> dict:
    import torch

    torch.manual_seed(0)
    args = make(device)
    a_orig, a_new = _clone(args), _clone(args)
    r_orig = original(*a_orig)
    r_new = adopted(*a_new)
    if device == "cuda":
        torch.cuda.synchronize()
    pairs = [("out", x, y) for x, y in zip(_tensors(r_orig), _tensors(r_new), strict=False)]
    pairs += [("arg", x, y) for x, y in zip(_tensors(a_orig), _tensors(a_new), strict=True)]
    if len(_tensors(r_orig)) != len(_tensors(r_new)):
        return {"result": f"DIFFERENT: {len(_tensors(r_orig))} tensors returned vs {len(_tensors(r_new))}"}
    if not _tensors(r_orig) and r_orig != r_new:
        return {"result": f"DIFFERENT: returned {r_orig!r} vs {r_new!r}"}
    max_abs = max_rel = 0.0
    identical = True
    rtol, atol = tolerance
    close = True
    for _, x, y in pairs:
        if x.shape != y.shape or x.dtype != y.dtype:
            return {"result": f"DIFFERENT: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}"}
        if x.numel() == 0:
            continue
        xd, yd = x.detach().double(), y.detach().double()
        both_nan = torch.isnan(xd) & torch.isnan(yd)
        diff = torch.where(both_nan, torch.zeros_like(xd), (xd - yd).abs())
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, float((diff / yd.abs().clamp_min(1e-12)).max()))
        identical = identical and bool(torch.equal(x, y) or (diff == 0).all())
        close = close and bool(torch.allclose(xd, yd, rtol=rtol, atol=atol, equal_nan=True))
    result = "identical" if identical else "close" if close else "DIFFERENT"
    return {"result": result, "tensors": len(pairs), "max_abs": max_abs, "max_rel": max_rel}


def _print_table(rows: list[dict]) -> None:
    print()
    header = f"{'project':<26} {'op':<28} {'tensors':>7} {'max abs':>11} {'max rel':>11}  result"
    print(header)
    print("-" * len(header))
    for r in rows:
        abs_ = f"{r['max_abs']:.3e}" if "max_abs" in r else "-"
        rel = f"{r['max_rel']:.3e}" if "max_rel" in r else "-"
        print(f"{r['project']:<26} {r['op']:<28} {r.get('tensors', '-')!s:>7} {abs_:>11} {rel:>11}  {r['result']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="fill a bundle folder (here)")
    p.add_argument("--bundle", required=True)
    p.add_argument("--python-version", default="3.12", help="the GPU machine's Python (for the wheels)")
    p.add_argument("pairs", nargs="+", metavar="NAME=ORIGINAL:ADOPTED[:INPUTS.py]")
    r = sub.add_parser("run", help="build both, compare, print the table (on the device machine)")
    r.add_argument("--bundle", required=True)
    r.add_argument("--only", nargs="*")
    r.add_argument("--device", choices=["cuda", "cpu"])
    r.add_argument("--jobs", type=int, default=3, help="projects built at once (the cores are shared among them)")
    r.add_argument("--arch", choices=["native", "as-written"], default="native",
                   help="native: compile both sides for this GPU only; as-written: what each project names")
    r.add_argument("--budget", type=float, default=540.0, help="seconds after which no build is started or waited for")
    args = parser.parse_args()
    return prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
