"""CPU variants of this kernel side by side, on the machine's cores (a developer sweep, as
launch_sweep.cu is for the GPU): each `--variant NAME=FLAGS` compiles rmsnorm_cpu/rmsnorm_cpu.cpp with
those -D flags into its own extension (torch.utils.cpp_extension, the build's -O3 -fopenmp), checks it
against float64 (the fused sum exactly), then every variant, F.rms_norm, the peers and a copy take
turns on study.py's CPU shapes (its timing: median of rounds, each sample >= 2 ms of calls).

    python benchmarks/cpu_sweep.py --variant shipped= --variant grain8k=-DRMSNORM_GRAIN=8192 \
        --peer rmsnorm=/path/to/kernels-community/rmsnorm --out /tmp/sweep
"""

import argparse
import concurrent.futures
import json
import math
import shlex
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils import cpp_extension

sys.path.insert(0, str(Path(__file__).resolve().parent))
import study  # noqa: E402  (the study's shapes, timing, checks and peers)

PROJECT = Path(__file__).resolve().parents[1]
BINDING = """#include <torch/extension.h>
#include "torch_binding.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rms_norm", &rms_norm_cpu);
  m.def("fused_add_rms_norm", &fused_add_rms_norm_cpu);
}
"""


def build(name: str, flags: list[str], work: Path):
    binding = work / f"{name}_binding.cpp"
    binding.write_text(BINDING)
    build_dir = work / name
    build_dir.mkdir(parents=True, exist_ok=True)
    return cpp_extension.load(
        name=f"rmsnorm_sweep_{name}", sources=[str(PROJECT / "rmsnorm_cpu" / "rmsnorm_cpu.cpp"), str(binding)],
        extra_cflags=["-O3", "-fopenmp", "-DCPU_KERNEL", *flags], extra_ldflags=["-fopenmp"],
        extra_include_paths=[str(PROJECT / "torch-ext")], build_directory=str(build_dir), verbose=False)


def bench_shape(shape, dtype, variants, peers) -> dict:
    """Every variant checked, then variants, peers, F.rms_norm and a copy timed in turns; the fused ops after."""
    hidden, esize = shape[-1], torch.finfo(dtype).bits // 8
    errors = {name: study.check_cpu(k, shape, dtype) for name, k in variants.items()}
    w = torch.randn(hidden, dtype=dtype)
    fns = {name: (lambda x, k=k: k.rms_norm(x, w, study.EPS)) for name, k in variants.items()}
    fns.update({f"peer_{p}": (lambda x, f=f: f(x, w, study.EPS)) for p, f in peers.items()})
    fns["f_rms_norm"] = lambda x: F.rms_norm(x, (hidden,), w, study.EPS)
    fns["copy"] = lambda x: x.clone()
    times = study.time_cpu(fns, [(torch.randn(shape, dtype=dtype),) for _ in range(2)])
    r = torch.randn(shape, dtype=dtype)
    fused = {f"fused {name}": (lambda x, k=k: k.fused_add_rms_norm(x, r, w, study.EPS)) for name, k in variants.items()}
    fused["add+F"] = lambda x: (F.rms_norm(x + r, (hidden,), w, study.EPS), x + r)
    times.update(study.time_cpu(fused, [(torch.randn(shape, dtype=dtype),) for _ in range(2)]))
    return {"dtype": str(dtype).removeprefix("torch."), "shape": list(shape),
            "mib": math.prod(shape) * esize / 2**20, "us": times, "max_rel_error": errors}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", required=True, metavar="NAME=FLAGS")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=WHERE")
    parser.add_argument("--dtypes", default="bfloat16,float32,float16")
    parser.add_argument("--shapes", help="e.g. 1x32x4096,1x1024x4096 (default: the study's CPU shapes)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, help="build folder, reused by a later run (default: a new one)")
    args = parser.parse_args()
    try:
        shapes = ([tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")] if args.shapes
                  else study.CPU_SHAPES)
    except ValueError:
        parser.error(f"--shapes {args.shapes}: expected sizes joined by x, shapes by commas (1x32x4096,1x1024x4096)")
    specs = dict(v.partition("=")[::2] for v in args.variant)
    if not all(name.isidentifier() for name in specs):
        parser.error("--variant NAME=FLAGS: NAME must be a Python identifier (it names the extension module)")
    work = args.work or Path(tempfile.mkdtemp(prefix="rmsnorm-sweep-"))
    work.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(len(specs)) as pool:
        futures = {name: pool.submit(build, name, shlex.split(flags), work) for name, flags in specs.items()}
        variants = {name: f.result() for name, f in futures.items()}
    peers = study.peer_functions(args.peer, "cpu")
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"environment": study.environment("cpu"), "variants": specs, "rows": []}
    print(results["environment"], flush=True)
    for dtype_name in args.dtypes.split(","):
        dtype = study.DTYPES[dtype_name]
        print(f"\n{dtype_name}: µs per call (fused = fused_add_rms_norm; add+F = x + r, then F.rms_norm)")
        names = [*variants, *(f"peer_{p}" for p in peers), "f_rms_norm", "copy"]
        print("| shape | MiB | " + " | ".join(names) + " | " + " | ".join(f"fused {v}" for v in variants)
              + " | add+F |")
        for shape in shapes:
            row = bench_shape(shape, dtype, variants, peers)
            results["rows"].append(row)
            times = row["us"]
            print(f"| {'x'.join(map(str, shape))} | {row['mib']:.1f} | "
                  + " | ".join(f"{times[n]:.1f}" for n in [*names, *(f"fused {v}" for v in variants), "add+F"])
                  + " |", flush=True)
        (args.out / "cpu_sweep.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
