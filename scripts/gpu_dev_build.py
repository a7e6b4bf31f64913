"""Development build of a compiled kernel project for the running torch only,
laid out as `publisher build` lays out a variant (build/<variant>/ with the
package, _ops.py, the extension and metadata.json), so `kernels.get_kernel`
loads it through LOCAL_KERNELS. For iterating on kernels on the GPU machine,
where `publisher` itself is not installed; releases go through `publisher build`.

    python scripts/gpu_dev_build.py kernel_projects/rmsnorm [--backend cuda] [--arch 9.0] [--define X]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import tomllib
import torch
from torch.utils import cpp_extension

# The macros of registration.h (UPSTREAM.md section 2); the real build writes its own.
REGISTRATION_H = """#pragma once
#include <Python.h>
#include <torch/library.h>
#define _CONCAT(A, B) A##B
#define CONCAT(A, B) _CONCAT(A, B)
#define _STRINGIFY(A) #A
#define STRINGIFY(A) _STRINGIFY(A)
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)
#define REGISTER_EXTENSION(NAME)                                                   \\
  PyMODINIT_FUNC CONCAT(PyInit_, NAME)() {                                         \\
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, STRINGIFY(NAME),   \\
                                        nullptr, 0, nullptr};                       \\
    return PyModule_Create(&module);                                               \\
  }
"""

OPS_PY = """import torch
{import_line}
ops = torch.ops.{ops_id}


def add_op_namespace_prefix(op_name: str) -> str:
    return "{ops_id}::" + op_name
"""


def variant_name(backend: str) -> str:
    major, minor = torch.__version__.split(".")[:2]
    if backend == "cuda":
        cu_major, cu_minor = torch.version.cuda.split(".")[:2]
        compute = f"cu{cu_major}{cu_minor}"
    else:
        compute = "cpu"
    return f"torch{major}{minor}-cxx11-{compute}-x86_64-linux"


def assemble(project: Path, config: dict, variant: str, ops_id: str, so: Path | None, backend: str, archs: list[str]) -> Path:
    python_name = config["general"]["name"].replace("-", "_")
    out = project / "build" / variant
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(project / "torch-ext" / python_name, out, ignore=shutil.ignore_patterns("__pycache__"))
    if so is not None:
        shutil.copy2(so, out / f"{ops_id}.abi3.so")
    import_line = f"from . import {ops_id}" if so is not None else ""
    (out / "_ops.py").write_text(OPS_PY.format(ops_id=ops_id, import_line=import_line))
    metadata = {
        "name": config["general"]["name"],
        "id": ops_id,
        "version": config["general"]["version"],
        "license": config["general"]["license"],
        "python-depends": [],
        "backend": {"type": backend, "archs": archs},
    }
    (out / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    return out


def build(project: Path, backend: str, archs: list[str], defines: list[str], verbose: bool) -> Path:
    config = tomllib.loads((project / "build.toml").read_text())
    name = config["general"]["name"]
    python_name = name.replace("-", "_")
    ops_id = f"_{python_name}_{backend}_dev"
    if "torch-noarch" in config:
        return assemble(project, config, f"torch-{backend}", ops_id, None, backend, [])
    sources = [project / s for s in config["torch"]["src"]]
    includes = [project / "torch-ext"]
    for kernel in config.get("kernel", {}).values():
        if kernel["backend"] != backend:
            continue
        sources += [project / s for s in kernel["src"]]
        includes += [project / i for i in kernel.get("include", [])]
        includes += sorted({(project / s).parent for s in kernel["src"]})
    compiled = [s for s in sources if s.suffix in (".cpp", ".cc", ".cu")]

    work = Path(tempfile.mkdtemp(prefix=f"{ops_id}-"))
    (work / "registration.h").write_text(REGISTRATION_H)
    flags = ["-O3", f"-D{backend.upper()}_KERNEL", *(f"-D{d}" for d in defines)]
    cuda_flags = flags + ["-Xptxas=-v", "--expt-relaxed-constexpr"]
    for arch in archs:
        cc = arch.replace(".", "")
        cuda_flags.append(f"-gencode=arch=compute_{cc},code=sm_{cc}")
    cpp_extension.load(
        name=ops_id,
        sources=[str(s) for s in compiled],
        extra_include_paths=[str(work), *(str(i) for i in includes)],
        extra_cflags=flags,
        extra_cuda_cflags=cuda_flags if backend == "cuda" else None,
        build_directory=str(work),
        is_python_module=False,
        verbose=verbose,
    )

    return assemble(project, config, variant_name(backend), ops_id, work / f"{ops_id}.so", backend,
                    archs if backend == "cuda" else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--arch", action="append", default=None, help="CUDA capability, e.g. 9.0 (repeatable)")
    parser.add_argument("--define", action="append", default=[], help="extra compile definition (repeatable)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    archs = args.arch or (["{}.{}".format(*torch.cuda.get_device_capability())] if args.backend == "cuda" else [])
    variant = build(args.project.resolve(), args.backend, archs, args.define, args.verbose)
    print(f"built {variant}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
