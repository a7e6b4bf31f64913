"""Developer script: the verdicts of `publisher test` on a GPU machine, for
projects copied beside this repository and fixtures shaped like real ones.

For each project folder given: `publisher build` (with --local, or with
--matrix FILE for the matrix-cell case), then `publisher test --require-gpu
--json`; one line per variant at the end (status, what ran, what the tests
saw, the reason). Fixtures (`--fixtures DIR`) are written first: a
quantize-shaped Python-only kernel with no tests/ (cpu + cuda), a kernel whose
tests import a module nobody declared, and a CUDA kernel whose op writes far
out of bounds (an illegal memory access must fail it, with the inputs).

    python scripts/device_verdicts.py --fixtures /tmp/fx PROJECT... [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

IMA = {
    "build.toml": '[general]\nname = "ima"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cuda"]\n\n'
                  '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n\n'
                  '[kernel.ima]\nbackend = "cuda"\ndepends = ["torch"]\ncuda-capabilities = ["9.0"]\n'
                  'src = ["ima/ima.cu"]\n',
    "torch-ext/torch_binding.cpp": '#include <torch/library.h>\n\n#include "registration.h"\n\n'
                                   'at::Tensor wild(const at::Tensor& x);\nat::Tensor checked(const at::Tensor& x, '
                                   'const at::Tensor& w);\n\n'
                                   'TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n'
                                   '  ops.def("checked(Tensor x, Tensor w) -> Tensor");\n'
                                   '  ops.def("wild(Tensor x) -> Tensor");\n}\n\n'
                                   'TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {\n'
                                   '  ops.impl("checked", &checked);\n  ops.impl("wild", &wild);\n}\n\n'
                                   'REGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n',
    "ima/ima.cu": '#include <torch/all.h>\n\n'
                  '__global__ void scribble(float* p) { p[(1ll << 40) + threadIdx.x] = 1.0f; }\n\n'
                  'at::Tensor wild(const at::Tensor& x) {\n  auto y = x.clone();\n'
                  '  scribble<<<1, 32>>>(y.data_ptr<float>());\n  return y;\n}\n\n'
                  'at::Tensor checked(const at::Tensor& x, const at::Tensor& w) {\n'
                  '  TORCH_CHECK(w.dim() == 1 && w.size(0) == x.size(-1), "w must be 1-D, one per column");\n'
                  '  return x * w;\n}\n',
    "torch-ext/ima/__init__.py": "from ._ops import ops\n\n\ndef wild(x):\n    return ops.wild(x)\n",
}


def write_fixtures(root: Path) -> list[Path]:
    import test_verdicts as tv

    from smoke_fixtures import write_files

    quant = write_files(root / "quant", {
        "build.toml": tv.NOARCH_BUILD.format(name="quant").replace('["cpu"]', '["cpu", "cuda"]'),
        "torch-ext/quant/__init__.py": tv.QUANT_INIT})
    halve = write_files(root / "halve", {
        "build.toml": tv.NOARCH_BUILD.format(name="halve").replace('["cpu"]', '["cpu", "cuda"]'),
        "torch-ext/halve/__init__.py": tv.HALVE_INIT,
        "tests/test_halve.py": tv.IMPORTS_HARMONICS.replace('torch.ones(2)', 'torch.ones(2, device="cuda")')
                                                   .replace("torch.full((2,), 0.5)",
                                                            'torch.full((2,), 0.5, device="cuda")')})
    return [quant, halve, write_files(root / "ima", IMA)]


def run(argv: list[str], log) -> subprocess.CompletedProcess:
    started = time.monotonic()
    result = subprocess.run(argv, capture_output=True, text=True)
    log.write(f"$ {' '.join(argv)}  ({time.monotonic() - started:.0f}s, exit {result.returncode})\n")
    log.write(result.stderr[-20000:] + "\n")
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("projects", nargs="*", type=Path)
    parser.add_argument("--fixtures", type=Path)
    parser.add_argument("--matrix", type=Path, help="build these projects for the matrix, not --local")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/verdicts-out")))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    projects = list(args.projects) + (write_fixtures(args.fixtures) if args.fixtures else [])
    publisher = [sys.executable, "-m", "publisher"]
    rows, report = [], {}
    with open(args.out / "verdicts.log", "w") as log:
        for project in projects:
            how = ["--matrix", str(args.matrix)] if args.matrix else ["--local"]
            started = time.monotonic()
            built = run([*publisher, "build", str(project), *how, "--no-hub-cache"], log)
            build_s = time.monotonic() - started
            if built.returncode != 0:
                rows.append((project.name, "-", "BUILD FAILED", "", "", built.stderr.strip().splitlines()[-1:]))
                continue
            tested = run([*publisher, "test", str(project), "--require-gpu", "--json",
                          *(["--matrix", str(args.matrix)] if args.matrix else [])], log)
            try:
                variants = json.loads(tested.stdout)["variants"]
            except (ValueError, KeyError):
                rows.append((project.name, "-", "TEST DID NOT REPORT", "", "", tested.stderr.strip()[-300:]))
                continue
            report[project.name] = variants
            for name, entry in variants.items():
                device = entry.get("device") or {}
                saw = device.get("gpu") or ("CPU, hidden: " + ",".join(device.get("hidden") or []))
                smoke = entry.get("smoke") or []
                ran = entry.get("suite", "")
                if smoke:
                    ran += f" {sum(c.get('outcome') == 'exercised' for c in smoke)}/{len(smoke)} exercised"
                counts = entry.get("tests") or {}
                rows.append((project.name, name, entry["status"], f"{ran}; {counts.get('passed', 0)} passed "
                             f"{counts.get('failed', 0)} failed", saw, f"build {build_s:.0f}s; {entry.get('reason', '')}"
                             + (f" | fix: {entry['fix']}" if entry.get("fix") else "")))
    (args.out / "verdicts.json").write_text(json.dumps(report, indent=1))
    for row in rows:
        print(" | ".join(str(c) for c in row)[:600])
    return 0


if __name__ == "__main__":
    sys.exit(main())
