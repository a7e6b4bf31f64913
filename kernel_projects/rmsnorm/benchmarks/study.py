"""RMSNorm on a CUDA GPU: our kernel against the transformers-style eager module,
torch.nn.functional.rms_norm and torch.compile of the eager module.

Every contender is timed two ways, on the same input sets: a pool of K sets
that together span several times the GPU's L2 cache, used in turn, so that no
call reads its input from the cache.
- stream: each call launched from Python as a user's code launches it
  (`kernel.rms_norm(x, w, eps)`), CUDA events around >= 4 ms of calls. This
  is what a user sees: GPU time where the GPU is the bottleneck, the host's
  cost per call (Python, dispatcher, launch) where the host is.
- graph: a CUDA graph of one call per set, replayed: GPU time alone, without
  the host's cost. Shows how far the stream figure is from the kernel's own.
Also printed: the host's cost of one call (a tiny input, CPU time per launch),
with autograd on (the default) and under torch.inference_mode.
The contenders of a shape take turns (one sample each per round, in a new
random order every round), so clock drift hits all alike; each reports its
median time per call. Our op is timed twice (ours, ours2): the spread between
the two is the noise. The copy ceiling is a device-to-device copy of the same
bytes (the faster of `x.clone()` and `torch.neg(x)`, each allocating its output
as our op does), timed the same way in the same rotation. Every run first
checks our outputs on fresh random inputs against a float64 reference, with the
output memory poisoned. Needs LOCAL_KERNELS (or the Hub) to resolve the kernel.

    python benchmarks/study.py [--dtypes bfloat16,float16,float32] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
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
L2_MULTIPLE = 6  # the input sets of a shape span this many L2 caches
MAX_SETS = 160
# Launches per stream sample: enough for SAMPLE_US, so that the latency of the
# first launch (a few µs, before the GPU has work) stays well under 1 %.
SAMPLE_US = 4000
MIN_CALLS = 20
ROUNDS = 20
BIG_MIB = 32  # the bandwidth claim is for tensors of this size and up
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
TOLERANCE = {torch.bfloat16: 8e-3, torch.float16: 1e-3, torch.float32: 1e-5}  # relative norm error
MODES = ("stream", "graph")


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
    """A CUDA graph of one call of fn per argument set."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for args in arg_sets:
            fn(*args)
    graph.replay()
    torch.cuda.synchronize()
    return graph


def stream_runner(fn, arg_sets):
    """Launches of fn from Python, whole passes over the sets, about SAMPLE_US long."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe = arg_sets * math.ceil(10 / len(arg_sets))
    start.record()
    for args in probe:
        fn(*args)
    end.record()
    end.synchronize()
    per_call_us = start.elapsed_time(end) * 1e3 / len(probe)
    calls = max(MIN_CALLS, math.ceil(SAMPLE_US / per_call_us))
    calls = list(itertools.islice(itertools.cycle(arg_sets), len(arg_sets) * math.ceil(calls / len(arg_sets))))

    def run():
        for args in calls:
            fn(*args)

    return run, len(calls)


def time_interleaved(fns, arg_sets, mode):
    """Median time (µs) of one call of each fn in `fns` (name -> fn), contenders taking turns."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compilation, autotuning, allocator
        for fn in fns.values():
            for args in arg_sets[:3]:
                fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if mode == "graph":
        runners = {name: (capture(fn, arg_sets).replay, len(arg_sets)) for name, fn in fns.items()}
    else:
        runners = {name: stream_runner(fn, arg_sets) for name, fn in fns.items()}
    samples = {name: [] for name in runners}
    order = list(runners)
    for _ in range(ROUNDS):
        random.shuffle(order)
        for name in order:
            run, calls = runners[name]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) * 1e3 / calls)
    del runners
    return {name: statistics.median(v) for name, v in samples.items()}


def host_cost(kernel, calls=3000):
    """CPU µs per call on a tiny input (the GPU keeps up, so this is the host's time alone)."""
    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16)
    r, w = torch.randn_like(x), torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    compiled_norm = torch.compile(eager_rms_norm, dynamic=False)
    compiled_add = torch.compile(eager_add_rms_norm, dynamic=False)
    fns = {
        "ours": lambda: kernel.rms_norm(x, w, EPS),
        "fused_ours": lambda: kernel.fused_add_rms_norm(x, r, w, EPS),
        "f_rms_norm": lambda: F.rms_norm(x, (4096,), w, EPS),
        "compiled": lambda: compiled_norm(x, w),
        "fused_compiled": lambda: compiled_add(x, r, w),
        "clone": lambda: x.clone(),
    }
    result = {}
    for mode, context in (("autograd", torch.enable_grad), ("inference_mode", torch.inference_mode)):
        with context():
            samples = {name: [] for name in fns}
            for fn in fns.values():
                for _ in range(100):
                    fn()
            order = list(fns)
            for _ in range(7):
                random.shuffle(order)
                for name in order:
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    for _ in range(calls):
                        fns[name]()
                    samples[name].append((time.perf_counter() - start) / calls * 1e6)
            torch.cuda.synchronize()
        result[mode] = {name: statistics.median(v) for name, v in samples.items()}
    return result


def copy_bandwidth() -> float:
    """Bytes read + written per second by the faster of two 1 GiB device copies (graph-timed)."""
    src = torch.randn(1 << 29, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    times = time_interleaved({"copy": lambda: dst.copy_(src), "neg": lambda: torch.neg(src, out=dst)}, [()] * 4, "graph")
    return 2 * src.numel() * src.element_size() / (min(times.values()) * 1e-6)


def make_sets(shape, dtype, tensors_per_call):
    numel = math.prod(shape)
    per_call = numel * torch.finfo(dtype).bits // 8 * (2 * tensors_per_call)
    footprint = L2_MULTIPLE * torch.cuda.get_device_properties(0).L2_cache_size
    k = max(2, min(MAX_SETS, math.ceil(footprint / per_call)))
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


def bench_shape(kernel, shape, dtype):
    hidden = shape[-1]
    # One compiled graph per shape, as a model with static shapes has: a cache
    # of every shape seen so far would make each compiled call check them all.
    torch._dynamo.reset()
    compiled_norm = torch.compile(eager_rms_norm, dynamic=False)
    compiled_add = torch.compile(eager_add_rms_norm, dynamic=False)
    w = torch.randn(hidden, device="cuda", dtype=dtype)
    esize = torch.finfo(dtype).bits // 8
    numel = math.prod(shape)
    row = {"shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "mib": numel * esize / 2**20,
           "bytes": 2 * numel * esize, "fused_bytes": 4 * numel * esize, "max_rel_error": check(kernel, shape, dtype)}

    ours = lambda x: kernel.rms_norm(x, w, EPS)  # noqa: E731
    norm = {
        "ours": ours,
        "ours2": ours,
        "eager": lambda x: eager_rms_norm(x, w),
        "f_rms_norm": lambda x: F.rms_norm(x, (hidden,), w, EPS),
        "compiled": lambda x: compiled_norm(x, w),
        "clone": lambda x: x.clone(),
        "neg": lambda x: torch.neg(x),
    }
    fused = lambda x, r: kernel.fused_add_rms_norm(x, r, w, EPS)  # noqa: E731
    fused_norm = {
        "fused_ours": fused,
        "fused_ours2": fused,
        "fused_unfused_ours": lambda x, r: kernel.rms_norm(x + r, w, EPS),
        "fused_eager": lambda x, r: eager_add_rms_norm(x, r, w),
        "fused_compiled": lambda x, r: compiled_add(x, r, w),
    }
    for contenders, tensors in ((norm, 1), (fused_norm, 2)):
        sets = make_sets(shape, dtype, tensors)
        for mode in MODES:
            times = time_interleaved(contenders, sets, mode)
            row[mode] = {**row.get(mode, {}), **times}
        del sets
    for mode in MODES:
        row[mode]["copy"] = min(row[mode].pop("clone"), row[mode].pop("neg"))
    return row


def environment():
    driver = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    props = torch.cuda.get_device_properties(0)
    return {
        "device": torch.cuda.get_device_name(0),
        "sms": props.multi_processor_count,
        "l2_mib": props.L2_cache_size / 2**20,
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def pct_copy(r, mode, key="ours", bytes_key="bytes"):
    """Our bandwidth as a percentage of the copy's at the same shape (copy moves `bytes`)."""
    return 100 * (r[bytes_key] / r[mode][key]) / (r["bytes"] / r[mode]["copy"])


def table(rows, mode):
    lines = [
        f"{'shape':>14} {'MiB':>4} {'copy':>6} {'ours':>6} {'ours2':>6} {'eager':>7} {'F.rms':>6} {'compl':>6}"
        f" {'xEag':>5} {'xF':>5} {'xCmp':>5} {'%copy':>5} | {'fused':>6} {'unfus':>6} {'eager':>7} {'compl':>6}"
        f" {'xEag':>5} {'xCmp':>5} {'%copy':>5}"
    ]
    for r in rows:
        t = r[mode]
        lines.append(
            f"{'x'.join(map(str, r['shape'])):>14} {r['mib']:4.0f} {t['copy']:6.1f} {t['ours']:6.2f} {t['ours2']:6.2f}"
            f" {t['eager']:7.1f} {t['f_rms_norm']:6.1f} {t['compiled']:6.2f} {t['eager'] / t['ours']:5.2f}"
            f" {t['f_rms_norm'] / t['ours']:5.2f} {t['compiled'] / t['ours']:5.2f} {pct_copy(r, mode):5.1f}"
            f" | {t['fused_ours']:6.2f} {t['fused_unfused_ours']:6.1f} {t['fused_eager']:7.1f} {t['fused_compiled']:6.2f}"
            f" {t['fused_eager'] / t['fused_ours']:5.2f} {t['fused_compiled'] / t['fused_ours']:5.2f}"
            f" {pct_copy(r, mode, 'fused_ours', 'fused_bytes'):5.1f}"
        )
    return "\n".join(lines)


def summary(rows, mode, copy_bw):
    big = [r for r in rows if r["mib"] >= BIG_MIB]
    t = [r[mode] for r in rows]
    return {
        "geomean_speedup_vs_eager": statistics.geometric_mean(x["eager"] / x["ours"] for x in t),
        "min_speedup_vs_f_rms_norm": min(x["f_rms_norm"] / x["ours"] for x in t),
        "min_speedup_vs_compiled": min(x["compiled"] / x["ours"] for x in t),
        "min_pct_copy_ge_32mib": min(pct_copy(r, mode) for r in big) if big else None,
        "min_pct_1gib_copy_ge_32mib": min(100 * r["bytes"] / (r[mode]["ours"] * 1e-6) / copy_bw for r in big) if big else None,
        "geomean_fused_speedup_vs_eager": statistics.geometric_mean(x["fused_eager"] / x["fused_ours"] for x in t),
        "min_fused_speedup_vs_compiled": min(x["fused_compiled"] / x["fused_ours"] for x in t),
        "min_fused_pct_copy_ge_32mib": min(pct_copy(r, mode, "fused_ours", "fused_bytes") for r in big) if big else None,
        "max_same_kernel_spread_pct": max(
            100 * abs(x[a] - x[b]) / x[a] for x in t for a, b in (("ours", "ours2"), ("fused_ours", "fused_ours2"))
        ),
    }


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = results["dtypes"]["bfloat16"]["rows"]
    labels = ["x".join(map(str, r["shape"])) for r in rows]
    xs = range(len(rows))
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(12, 10), sharex=True)
    width = 0.27
    contenders = [("ours", "rmsnorm (this kernel)"), ("f_rms_norm", "F.rms_norm"), ("compiled", "torch.compile(eager)")]
    for i, (key, name) in enumerate(contenders):
        at = [x + (i - 1) * width for x in xs]
        ax1.bar(at, [r["stream"]["eager"] / r["stream"][key] for r in rows], width, label=name)
        ax2.bar(at, [pct_copy(r, "stream", key) for r in rows], width, label=name)
    ax1.set_ylabel("RMSNorm: speedup over eager (x)")
    ax1.set_ylim(0, ax1.get_ylim()[1] * 1.25)
    ax1.legend(ncol=3, loc="upper left")
    ax2.axhline(100, color="gray", lw=0.8)
    ax2.set_ylim(0, ax2.get_ylim()[1] * 1.15)
    ax2.set_ylabel("RMSNorm: % of copy bandwidth")
    fused = [("fused_ours", "fused_add_rms_norm (this kernel)"), ("fused_compiled", "torch.compile(eager add + norm)")]
    for i, (key, name) in enumerate(fused):
        ax3.bar([x + (i - 0.5) * width for x in xs], [r["stream"]["fused_eager"] / r["stream"][key] for r in rows],
                width, label=name, color=f"C{3 + i}")
    ax3.set_ylabel("add + norm: speedup over eager (x)")
    ax3.set_ylim(0, ax3.get_ylim()[1] * 1.25)
    ax3.legend(ncol=2, loc="upper left")
    ax3.set_xticks(list(xs))
    ax3.set_xticklabels(labels, rotation=45, ha="right")
    env = results["environment"]
    fig.suptitle(f"RMSNorm bf16, calls launched from Python, on {env['device']} (torch {env['torch']}, CUDA {env['cuda']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="bfloat16,float16,float32")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("benchmark needs a CUDA GPU", file=sys.stderr)
        return 2
    kernel = kernels.get_kernel("your-hf-org/rmsnorm", version=1)
    torch.manual_seed(int(time.time()))

    copy_bw = copy_bandwidth()
    host = host_cost(kernel)
    results = {"environment": environment(), "copy_bandwidth_gbs": copy_bw / 1e9, "host_us": host, "dtypes": {}}
    print(f"{results['environment']}\n1 GiB copy (read+write): {copy_bw / 1e9:.0f} GB/s")
    text = ["\nhost µs per call (8x4096 bf16): " + "; ".join(
        f"{mode}: " + ", ".join(f"{name} {us:.1f}" for name, us in costs.items()) for mode, costs in host.items())]
    for name in args.dtypes.split(","):
        dtype = DTYPES[name]
        rows = [bench_shape(kernel, shape, dtype) for shape in SHAPES]
        results["dtypes"][name] = {"rows": rows, "summary": {mode: summary(rows, mode, copy_bw) for mode in MODES}}
        for mode in MODES:
            text.append(f"\n{name}, {mode} (µs per call; x = speedup of ours; %copy = of a copy of the same bytes)")
            text.append(table(rows, mode))
            text.append(json.dumps(results["dtypes"][name]["summary"][mode], indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    if "bfloat16" in results["dtypes"]:
        plot(results, args.out / "rmsnorm.png")
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
