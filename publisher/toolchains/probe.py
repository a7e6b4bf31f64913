"""Describe the torch installation of the interpreter that runs this file.

Standalone (stdlib only): it runs inside toolchain environments that do not
have publisher installed. It does not import torch (slow, and a CUDA torch
may print warnings without a GPU); it reads torch's files instead."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import sys
import sysconfig
from pathlib import Path


def probe() -> dict:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {"error": f"torch is not installed for {sys.executable}"}
    torch_dir = Path(list(spec.submodule_search_locations)[0])
    version_py = (torch_dir / "version.py").read_text()

    def field(name: str) -> str | None:
        m = re.search(rf"^{name}\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", version_py, re.M)
        return m.group(1) if m else None

    site = torch_dir.parent
    # Since torch 2.7 every wheel uses the C++11 ABI and says so as a literal here;
    # None (unknown) for older builds that ask their extension module.
    abi = re.search(r"def compiled_with_cxx11_abi\(\)[^:]*:\s*(?:r?\"\"\"[\s\S]*?\"\"\"\s*)?return (True|False)\b",
                    (torch_dir / "__init__.py").read_text())
    nvidia = site / "nvidia"
    return {
        "python": sys.executable,
        "python_version": "{}.{}.{}".format(*sys.version_info[:3]),
        "python_include": sysconfig.get_paths()["include"],
        "torch_version": importlib.metadata.version("torch"),
        "torch_dir": str(torch_dir),
        "cuda": field("cuda"),
        "hip": field("hip"),
        "xpu": field("xpu"),
        "cxx11_abi": abi.group(1) == "True" if abi else None,
        "site_packages": str(site),
        # CUDA wheels put headers/libs under nvidia/<pkg>/ (CUDA 12) or nvidia/cu13/ (CUDA 13)
        "nvidia_include": sorted(str(p) for p in nvidia.glob("*/include") if p.is_dir()),
        "nvidia_lib": sorted(str(p) for p in nvidia.glob("*/lib") if p.is_dir()),
        "nvidia_bin": sorted(str(p) for p in nvidia.glob("*/bin") if p.is_dir()),
    }


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
