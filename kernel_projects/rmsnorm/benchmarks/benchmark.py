"""RMSNorm on a CUDA GPU: our kernel against the transformers-style eager module,
torch.nn.functional.rms_norm and torch.compile of the eager module.

Each contender gets one CUDA graph that calls it once on each of the same K
input sets (K chosen so the sets span well over the L2 cache); the graphs of
all contenders for a shape are replayed in turns, in a new random order each
round, and each reports its median time per call: GPU time, free of launch gaps
and of L2 hits a single reused input would get, with clock drift shared by all.
Our kernel is timed twice (ours, ours2: the spread between the two is the
noise) and once with programmatic dependent launch off (RMSNORM_PDL=0), so the
gain from overlapping consecutive launches shows separately. Every run checks
our outputs on fresh random inputs against a float64 reference, with the output
memory poisoned first. Needs LOCAL_KERNELS (or the Hub) to resolve the kernel.

    python benchmarks/benchmark.py [--dtypes bfloat16,float16,float32] [--out DIR] [--tune]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import kernels
import torch
import torch.nn.functional as F

# The 15 shapes of the published agent-written RMSNorm studies.
SHAPES = [
    (1, 1024, 2048), (2, 1024, 2048), (4, 1024, 2048), (1, 4096, 2048), (2, 4096, 3072),
    (1, 8192, 2048), (4, 4096, 3072), (1, 128, 4096), (1, 512, 4096), (1, 1024, 4096),
    (1, 2048, 4096), (1, 4096, 4096), (4, 512, 4096), (8, 256, 4096), (1, 8192, 4096),
]
EPS = 1e-6
FOOTPRINT = 320 << 20  # bytes touched per graph replay: over 6x the H100's 50 MB L2
MAX_SETS = 160
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
TOLERANCE = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5}  # relative norm error


def eager_rms_norm(x, weight):
    """transformers' LlamaRMSNorm.forward."""
    input_dtype = x.dtype
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + EPS)
    return weight * h.to(input_dtype)


def eager_add_rms_norm(x, r, weight):
    s = x + r
    return eager_rms_norm(s, weight), s


def capture(fn, arg_sets):
    """A CUDA graph of one call of fn per argument set (after a warm-up outside it)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for args in arg_sets[:3]:
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for args in arg_sets:
            fn(*args)
    graph.replay()
    torch.cuda.synchronize()
    return graph


def time_interleaved(fns, arg_sets, replays=30):
    """Median GPU time (µs) of one call of each fn in `fns` (name -> fn), from
    graph replays over the rotated sets, the contenders taking turns."""
    graphs = {name: capture(fn, arg_sets) for name, fn in fns.items()}
    samples = {name: [] for name in graphs}
    order = list(graphs)
    for _ in range(replays):
        random.shuffle(order)
        for name in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graphs[name].replay()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1e3 / len(arg_sets))
    del graphs
    return {name: statistics.median(v) for name, v in samples.items()}


def time_per_call(fn, arg_sets, replays=30):
    return time_interleaved({"fn": fn}, arg_sets, replays)["fn"]


def without_pdl(fn):
    """fn launched with programmatic dependent launch off (read at launch, so at capture)."""

    def call(*args):
        os.environ["RMSNORM_PDL"] = "0"
        try:
            return fn(*args)
        finally:
            del os.environ["RMSNORM_PDL"]

    return call


def copy_us(arg_sets):
    """Fastest device-to-device copy of each set's input into its output: the
    memcpy path (copy engines inside a graph) and an SM kernel (elementwise neg)."""
    return min(
        time_per_call(lambda x, o: o.copy_(x), arg_sets),
        time_per_call(lambda x, o: torch.neg(x, out=o), arg_sets),
    )


def copy_bandwidth() -> float:
    """Bytes read + written per second by the fastest large copy (the ceiling)."""
    src = torch.randn(1 << 29, device="cuda", dtype=torch.bfloat16)  # 1 GiB
    us = copy_us([[src, torch.empty_like(src)]] * 4)
    return 2 * src.numel() * src.element_size() / (us * 1e-6)


def make_sets(shape, dtype, tensors_per_call):
    numel = math.prod(shape)
    per_call = numel * torch.finfo(dtype).bits // 8 * (2 * tensors_per_call)
    k = max(2, min(MAX_SETS, math.ceil(FOOTPRINT / per_call)))
    return [[torch.randn(shape, device="cuda", dtype=dtype) for _ in range(tensors_per_call)] for _ in range(k)]


def relative_error(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def check(kernel, shape, dtype):
    """Fresh inputs, poisoned output memory, float64 reference. Returns the worst relative error."""
    x = torch.randn(shape, device="cuda", dtype=dtype) * (torch.rand(shape[:-1] + (1,), device="cuda") * 4 + 0.1).to(dtype)
    r = torch.randn(shape, device="cuda", dtype=dtype)
    w = torch.randn(shape[-1], device="cuda", dtype=dtype) * 0.5 + 1
    errors = []
    for fused in (False, True):
        # Freed NaN blocks are what the caching allocator hands out next: an
        # element the kernel fails to write stays NaN.
        poison = [torch.full(shape, float("nan"), device="cuda", dtype=dtype) for _ in range(2)]
        del poison
        if fused:
            out, s = kernel.fused_add_rms_norm(x, r, w, EPS)
            if not torch.equal(s, x + r):
                raise AssertionError(f"{shape} {dtype}: residual sum differs from x + r")
            src = s
        else:
            out, src = kernel.rms_norm(x, w, EPS), x
        if not torch.isfinite(out).all():
            raise AssertionError(f"{shape} {dtype} fused={fused}: non-finite output (unwritten elements?)")
        x64 = src.double()
        ref = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
        err = relative_error(out, ref)
        if not err < TOLERANCE[dtype]:
            raise AssertionError(f"{shape} {dtype} fused={fused}: relative error {err:.2e}")
        errors.append(err)
    return max(errors)


def bench_shape(kernel, shape, dtype, compiled_norm, compiled_add):
    hidden = shape[-1]
    w = torch.randn(hidden, device="cuda", dtype=dtype)
    esize = torch.finfo(dtype).bits // 8
    numel = math.prod(shape)
    row = {"shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "mib": numel * esize / 2**20}
    row["max_rel_error"] = check(kernel, shape, dtype)

    sets = make_sets(shape, dtype, 1)
    out_sets = [[x, torch.empty_like(x)] for (x,) in sets]
    row["copy_us"] = copy_us(out_sets)
    del out_sets
    ours = lambda x: kernel.rms_norm(x, w, EPS)  # noqa: E731
    times = time_interleaved(
        {
            "ours_us": ours,
            "ours2_us": ours,
            "ours_nopdl_us": without_pdl(ours),
            "eager_us": lambda x: eager_rms_norm(x, w),
            "f_rms_norm_us": lambda x: F.rms_norm(x, (hidden,), w, EPS),
            "compiled_us": lambda x: compiled_norm(x, w),
        },
        sets,
    )
    row.update(times)
    row["bytes"] = (2 * numel + hidden) * esize
    del sets

    sets = make_sets(shape, dtype, 2)
    fused = lambda x, r: kernel.fused_add_rms_norm(x, r, w, EPS)  # noqa: E731
    times = time_interleaved(
        {
            "fused_ours_us": fused,
            "fused_ours2_us": fused,
            "fused_ours_nopdl_us": without_pdl(fused),
            "fused_unfused_ours_us": lambda x, r: kernel.rms_norm(x + r, w, EPS),
            "fused_eager_us": lambda x, r: eager_add_rms_norm(x, r, w),
            "fused_compiled_us": lambda x, r: compiled_add(x, r, w),
        },
        sets,
    )
    row.update(times)
    row["fused_bytes"] = (4 * numel + hidden) * esize
    return row


def tune(kernel, dtype):
    """Sweep launch shapes of the register-resident kernel (needs a --define RMSNORM_TUNING build)."""
    max_threads = {1: 1024, 2: 1024, 4: 512, 8: 256}
    print(f"\ntuning {dtype}: µs per call for (vectors/thread, threads/row, rows/block)")
    best = {}
    for shape in sorted(set(SHAPES), key=math.prod):
        hidden = shape[-1]
        vectors = hidden // (16 // (torch.finfo(dtype).bits // 8))
        w = torch.randn(hidden, device="cuda", dtype=dtype)
        sets = make_sets(shape, dtype, 1)
        results = {}
        for vpt, limit in max_threads.items():
            tpr = ((vectors + vpt - 1) // vpt + 31) // 32 * 32
            for rpb in (1, 2, 4, 8):
                if tpr * rpb > limit:
                    continue
                results[(vpt, tpr, rpb)] = time_per_call(
                    lambda x: kernel.ops.rms_norm_tuned(x, w, EPS, vpt, tpr, rpb), sets, replays=15
                )
        ordered = sorted(results.items(), key=lambda kv: kv[1])
        best[shape] = ordered[0]
        print(f"{'x'.join(map(str, shape)):>14}  " + "  ".join(f"{k}:{v:.1f}" for k, v in ordered[:6]))
    return best


def environment():
    driver = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "sms": props.multi_processor_count,
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def table(rows, copy_bw):
    """ours2: the same kernel timed again (noise); noPDL: ours with RMSNORM_PDL=0; x: speedups of ours."""
    lines = [
        f"{'shape':>14} {'MiB':>4} {'copy':>6} {'ours':>6} {'ours2':>6} {'noPDL':>6} {'eager':>7} {'F.rms':>6} {'compl':>6}"
        f" {'xEag':>5} {'xF':>5} {'xCmp':>5} {'xCmpN':>5} {'%copy':>5} | {'fused':>6} {'noPDL':>6} {'unfus':>6} {'eager':>7}"
        f" {'compl':>6} {'xCmp':>5} {'xCmpN':>5} {'%copy':>5}"
    ]
    for r in rows:
        gbs = r["bytes"] / r["ours_us"] / 1e3
        fgbs = r["fused_bytes"] / r["fused_ours_us"] / 1e3
        lines.append(
            f"{'x'.join(map(str, r['shape'])):>14} {r['mib']:4.0f} {r['copy_us']:6.1f} {r['ours_us']:6.2f} {r['ours2_us']:6.2f}"
            f" {r['ours_nopdl_us']:6.2f} {r['eager_us']:7.1f} {r['f_rms_norm_us']:6.1f} {r['compiled_us']:6.2f}"
            f" {r['eager_us'] / r['ours_us']:5.2f} {r['f_rms_norm_us'] / r['ours_us']:5.2f} {r['compiled_us'] / r['ours_us']:5.2f}"
            f" {r['compiled_us'] / r['ours_nopdl_us']:5.2f} {100 * gbs * 1e9 / copy_bw:5.1f} | {r['fused_ours_us']:6.2f}"
            f" {r['fused_ours_nopdl_us']:6.2f} {r['fused_unfused_ours_us']:6.1f} {r['fused_eager_us']:7.1f} {r['fused_compiled_us']:6.2f}"
            f" {r['fused_compiled_us'] / r['fused_ours_us']:5.2f} {r['fused_compiled_us'] / r['fused_ours_nopdl_us']:5.2f}"
            f" {100 * fgbs * 1e9 / copy_bw:5.1f}"
        )
    return "\n".join(lines)


def summary(rows, copy_bw):
    big = [r for r in rows if r["mib"] >= 32]
    return {
        "mean_speedup_vs_eager": statistics.mean(r["eager_us"] / r["ours_us"] for r in rows),
        "min_speedup_vs_f_rms_norm": min(r["f_rms_norm_us"] / r["ours_us"] for r in rows),
        "min_speedup_vs_compiled": min(r["compiled_us"] / r["ours_us"] for r in rows),
        "min_speedup_vs_compiled_without_pdl": min(r["compiled_us"] / r["ours_nopdl_us"] for r in rows),
        "min_pct_copy_bw_ge_32mib": min(100 * r["bytes"] / (r["ours_us"] * 1e-6) / copy_bw for r in big) if big else None,
        "mean_fused_speedup_vs_eager": statistics.mean(r["fused_eager_us"] / r["fused_ours_us"] for r in rows),
        "min_fused_speedup_vs_compiled": min(r["fused_compiled_us"] / r["fused_ours_us"] for r in rows),
        "min_fused_speedup_vs_compiled_without_pdl": min(r["fused_compiled_us"] / r["fused_ours_nopdl_us"] for r in rows),
        "max_same_kernel_spread_pct": max(
            100 * abs(r[a] - r[b]) / r[a] for r in rows for a, b in (("ours_us", "ours2_us"), ("fused_ours_us", "fused_ours2_us"))
        ),
    }


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["dtypes"]["bfloat16"]["rows"]
    labels = ["x".join(map(str, r["shape"])) for r in rows]
    xs = range(len(rows))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    width = 0.2
    contenders = [
        ("ours_us", "rmsnorm (this kernel)"),
        ("ours_nopdl_us", "rmsnorm, RMSNORM_PDL=0"),
        ("f_rms_norm_us", "F.rms_norm"),
        ("compiled_us", "torch.compile(eager)"),
    ]
    for i, (key, name) in enumerate(contenders):
        ax1.bar([x + (i - 1.5) * width for x in xs], [r["eager_us"] / r[key] for r in rows], width, label=name)
    ax1.axhline(1, color="gray", lw=0.8)
    ax1.set_ylabel("speedup over eager (x)")
    ax1.legend()
    copy_bw = results["copy_bandwidth_gbs"] * 1e9
    for i, (key, name) in enumerate(contenders):
        ax2.bar([x + (i - 1.5) * width for x in xs], [100 * r["bytes"] / (r[key] * 1e-6) / copy_bw for r in rows], width, label=name)
    ax2.axhline(80, color="red", lw=0.8, ls="--")
    ax2.set_ylabel("% of measured copy bandwidth")
    ax2.set_xticks(list(xs))
    ax2.set_xticklabels(labels, rotation=45, ha="right")
    env = results["environment"]
    fig.suptitle(f"RMSNorm bf16 on {env['device']} (torch {env['torch']}, CUDA {env['cuda']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="bfloat16,float16,float32")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--tune", action="store_true", help="sweep launch shapes (tuning build only)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    kernel = kernels.get_kernel("kernels-publisher/rmsnorm", version=1)
    # One compiled graph per shape and dtype, as a model with static shapes gets.
    torch._dynamo.config.recompile_limit = 1024
    torch._dynamo.config.accumulated_recompile_limit = 4096
    torch.manual_seed(int(time.time()))
    if args.tune:
        for name in args.dtypes.split(","):
            tune(kernel, DTYPES[name])
        return 0

    copy_bw = copy_bandwidth()
    results = {"environment": environment(), "copy_bandwidth_gbs": copy_bw / 1e9, "dtypes": {}}
    print(f"{results['environment']}\ncopy bandwidth (read+write): {copy_bw / 1e9:.0f} GB/s")
    text = []
    for name in args.dtypes.split(","):
        dtype = DTYPES[name]
        compiled_norm = torch.compile(eager_rms_norm, dynamic=False)
        compiled_add = torch.compile(eager_add_rms_norm, dynamic=False)
        rows = [bench_shape(kernel, shape, dtype, compiled_norm, compiled_add) for shape in SHAPES]
        results["dtypes"][name] = {"rows": rows, "summary": summary(rows, copy_bw)}
        text.append(f"\n{name} (µs per call; x = speedup of ours, xCmpN: of ours without PDL; %copy of {copy_bw / 1e9:.0f} GB/s)\n{table(rows, copy_bw)}")
        text.append(json.dumps(results["dtypes"][name]["summary"], indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    if "bfloat16" in results["dtypes"]:
        plot(results, args.out / "rmsnorm.png")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
