"""Development sweep on a CUDA GPU: the register kernel with its choices forced
(launch shape, streaming loads, programmatic dependent launch) against the
kernel's own choices ("auto", timed twice: auto/auto2 is the noise floor) and
torch.compile (default, and with Inductor's own PDL option), all timed
INTERLEAVED (one replay of each candidate's graph per round, random order) so
clock drift hits every candidate alike. Builds benchmarks/variants.cu with nvcc
and calls it through ctypes; needs no kernel build.

    python benchmarks/variants.py [--cases bf16_norm,...] [--out DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from benchmark import EPS, eager_add_rms_norm, eager_rms_norm, make_sets  # noqa: E402

CODES = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
NAMES = {0: "bf16", 1: "fp16", 2: "fp32"}
SHAPES = [(1, 128, 4096), (1, 512, 4096), (1, 1024, 2048), (1, 1024, 4096), (2, 1024, 2048), (8, 256, 4096),
          (2, 4096, 3072), (1, 8192, 4096)]
CASES = {f"{NAMES[CODES[d]]}_{kind}": (d, kind == "fused", SHAPES) for d in CODES for kind in ("norm", "fused")}


def build() -> Path:
    """Objects, library and ptxas report in a temporary folder."""
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="rmsnorm-variants-"))
    nvcc = os.environ.get("NVCC", "nvcc")
    cc = "".join(map(str, torch.cuda.get_device_capability()))
    objs = [work / f"variants{d}.o" for d in range(3)]

    def compile_one(d):
        cmd = [nvcc, "-O3", "-std=c++17", f"-gencode=arch=compute_{cc},code=sm_{cc}", "-Xcompiler", "-fPIC",
               "-Xptxas=-v", f"-DVARIANT_DTYPE={d}", "-c", str(HERE / "variants.cu"), "-o", str(objs[d])]
        return subprocess.run(cmd, capture_output=True, text=True)

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(compile_one, range(3)))
    (work / "variants_build.log").write_text("".join(r.stdout + r.stderr for r in results))
    for r in results:
        if r.returncode:
            sys.exit(f"nvcc failed:\n{r.stderr[-3000:]}")
    lib = work / "libvariants.so"
    subprocess.run([nvcc, "-shared", "-o", str(lib), *map(str, objs)], check=True)
    return lib


class Variants:
    def __init__(self, lib: Path):
        self.lib = ctypes.CDLL(str(lib))
        self.fns = {}
        for code, name in NAMES.items():
            fn = getattr(self.lib, f"rmsnorm_variant_{name}")
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_int] * 2 + [ctypes.c_void_p] * 5 + [ctypes.c_longlong, ctypes.c_int, ctypes.c_float] + [ctypes.c_int] * 3 + [ctypes.c_void_p]
            self.fns[code] = fn

    def call(self, v, x, r, w):
        """v = (stream_loads, pdl, vpt, tpr, rpb); -1 / vpt 0: the kernel's own choice."""
        out = torch.empty_like(x)
        s = torch.empty_like(x) if r is not None else None
        err = self.fns[CODES[x.dtype]](
            v[0], v[1], out.data_ptr(), s.data_ptr() if s is not None else None, x.data_ptr(),
            r.data_ptr() if r is not None else None, w.data_ptr(), x.numel() // x.shape[-1], x.shape[-1], EPS,
            v[2], v[3], v[4], torch.cuda.current_stream().cuda_stream,
        )
        if err:
            raise RuntimeError(f"variant {v}: CUDA error {err}")
        return (out, s) if r is not None else out


def launch_shapes(hidden, dtype):
    vectors = hidden * (torch.finfo(dtype).bits // 8) // 16
    shapes = []
    for vpt, limit in ((1, 1024), (2, 1024), (4, 512), (8, 256)):
        tpr = (math.ceil(vectors / vpt) + 31) // 32 * 32
        for rpb in (1, 2):
            if tpr >= 64 and tpr * rpb <= min(limit, 1024) and (tpr <= 512 or rpb == 1):
                shapes.append((vpt, tpr, rpb))
    return shapes


def check(variants, v, shape, dtype, fused):
    x = torch.randn(shape, device="cuda", dtype=dtype) * (torch.rand(shape[:-1] + (1,), device="cuda") * 4 + 0.1).to(dtype)
    r = torch.randn(shape, device="cuda", dtype=dtype) if fused else None
    w = torch.randn(shape[-1], device="cuda", dtype=dtype) * 0.5 + 1
    poison = [torch.full(shape, float("nan"), device="cuda", dtype=dtype) for _ in range(2)]
    del poison
    res = variants.call(v, x, r, w)
    torch.cuda.synchronize()
    out, src = (res[0], res[1]) if fused else (res, x)
    if fused and not torch.equal(src, x + r):
        raise AssertionError(f"{v} {shape}: sum differs")
    x64 = src.double()
    ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    if not (torch.isfinite(out).all() and err < {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5}[dtype]):
        raise AssertionError(f"{v} {shape} {dtype}: error {err}")


def capture(fn, arg_sets, keep):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for args in arg_sets[:2]:
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    kept = []
    with torch.cuda.graph(graph):
        for args in arg_sets:
            o = fn(*args)
            if keep:
                kept.append(o)
    graph.replay()
    torch.cuda.synchronize()
    return graph, kept


def interleaved(candidates, arg_sets, rounds):
    """candidates: name -> (fn, keep_outputs). Median µs per call for each."""
    graphs = {name: capture(fn, arg_sets, keep) for name, (fn, keep) in candidates.items()}
    samples = {name: [] for name in graphs}
    names = list(graphs)
    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graphs[name][0].replay()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1e3 / len(arg_sets))
    del graphs
    return {name: statistics.median(s) for name, s in samples.items()}


def pdl_twin(fn):
    """Same body, own code object: Dynamo caches compiled code per code object."""

    def twin(*args):
        return fn(*args)

    return twin


def run_case(variants, dtype, fused, shape, rounds):
    hidden = shape[-1]
    w = torch.randn(hidden, device="cuda", dtype=dtype)
    sets = make_sets(shape, dtype, 2 if fused else 1)
    for args in sets:
        if not fused:
            args.append(None)
    auto = (-1, -1, 0, 0, 0)
    named = {"auto": auto, "auto2": auto, "nopdl": (-1, 0, 0, 0, 0), "stream0": (0, -1, 0, 0, 0), "stream1": (1, -1, 0, 0, 0)}
    named.update({f"L{vpt}/{tpr}/{rpb}": (-1, -1, vpt, tpr, rpb) for vpt, tpr, rpb in launch_shapes(hidden, dtype)})
    for v in set(named.values()):
        check(variants, v, shape, dtype, fused)
    cands = {name: ((lambda x, r, v=v: variants.call(v, x, r, w)), False) for name, v in named.items()}
    cands["auto_keep"] = ((lambda x, r: variants.call(auto, x, r, w)), True)
    eager = eager_add_rms_norm if fused else eager_rms_norm
    compiled = torch.compile(eager, dynamic=False)
    compiled_pdl = torch.compile(pdl_twin(eager), dynamic=False, options={"triton.enable_pdl": True})
    if fused:
        cands["compiled"] = ((lambda x, r: compiled(x, r, w)), False)
        cands["compiled_pdl"] = ((lambda x, r: compiled_pdl(x, r, w)), False)
        cands["compiled_keep"] = ((lambda x, r: compiled(x, r, w)), True)
    else:
        cands["compiled"] = ((lambda x, r: compiled(x, w)), False)
        cands["compiled_pdl"] = ((lambda x, r: compiled_pdl(x, w)), False)
        cands["compiled_keep"] = ((lambda x, r: compiled(x, w)), True)
        cands["F.rms_norm"] = ((lambda x, r: F.rms_norm(x, (hidden,), w, EPS)), False)
    try:
        return interleaved(cands, sets, rounds)
    except Exception as e:  # noqa: BLE001 - Inductor's PDL option may not work on this torch
        print(f"  ({e.__class__.__name__}: {str(e)[:200]}; retrying without compiled_pdl)")
        del cands["compiled_pdl"]
        return interleaved(cands, sets, rounds)


def inductor_configs():
    """Autotuned Triton configs and load hints of the compiled kernels run so far."""
    from torch._inductor.codecache import PyCodeCache

    lines = []
    for mod in list(getattr(PyCodeCache, "modules", [])) + list(getattr(PyCodeCache, "modules_no_attr", {}).values()):
        for name in dir(mod):
            obj = getattr(mod, name, None)
            if name.startswith("triton_") and hasattr(obj, "launchers") and obj.launchers:
                launcher = obj.launchers[0]
                cfg = getattr(launcher, "config", None)
                ptx = ""
                try:
                    ptx = launcher.bin.asm.get("ptx", "")
                except Exception:  # noqa: BLE001 - diagnostics only
                    pass
                import re

                loads = sorted(set(re.findall(r"(ld\.global[.\w:]*)", ptx)))
                stores = sorted(set(re.findall(r"(st\.global[.\w:]*)", ptx)))
                lines.append(f"{name}: {cfg} size_hints={getattr(obj, 'size_hints', '?')} loads={loads} stores={stores}")
    return sorted(set(lines))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args()
    torch._dynamo.config.recompile_limit = 1024
    torch._dynamo.config.accumulated_recompile_limit = 4096
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    lib = build()
    variants = Variants(lib)
    print(f"built {lib} in {time.time() - t0:.0f} s", flush=True)
    results = {}
    summary = []
    for case in args.cases.split(","):
        dtype, fused, shapes = CASES[case]
        for shape in shapes:
            t = run_case(variants, dtype, fused, shape, args.rounds)
            key = f"{case} {'x'.join(map(str, shape))}"
            results[key] = t
            shapes = {k: v for k, v in t.items() if k.startswith("L")}
            best = min(shapes, key=shapes.get)
            summary.append(
                f"{key:>22} auto {t['auto']:6.2f}/{t['auto2']:6.2f} nopdl {t['nopdl']:6.2f} s0 {t['stream0']:6.2f} s1 {t['stream1']:6.2f}"
                f" best {best} {shapes[best]:6.2f} | cmp {t['compiled']:6.2f} cmpPDL {t.get('compiled_pdl', float('nan')):6.2f}"
                f" | keep a/c {t['auto_keep']:6.2f}/{t['compiled_keep']:6.2f} | x {t['compiled'] / t['auto']:4.2f} xN {t['compiled'] / t['nopdl']:4.2f}"
            )
            print(summary[-1], flush=True)
            (args.out / "variants.json").write_text(json.dumps(results, indent=1))
    print("Inductor's kernels:\n" + "\n".join(inductor_configs()))
    print(f"done in {time.time() - t0:.0f} s")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
