"""What a variant was (or would be) tested on: GPU, driver, torch, CUDA,
platform, Python — collected inside the variant's environment.

Standalone (stdlib + torch): the runner executes this file with the
variant's interpreter, which need not have publisher installed."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys


def _driver() -> str | None:
    """The NVIDIA driver version (torch does not expose it); None without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0].strip() if out else None


def collect() -> dict:
    import torch

    info = {
        "gpu": None,
        "driver": None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "platform": f"{platform.machine()}-{platform.system().lower()}",
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        # accelerator kind -> usable here (a CUDA torch without a GPU reports False)
        "accelerators": {"cuda": False, "rocm": False, "xpu": False, "metal": False},
    }
    if getattr(torch.version, "hip", None):
        info["rocm"] = torch.version.hip
    if torch.cuda.is_available():
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        info["accelerators"][kind] = True
        info["gpu"] = torch.cuda.get_device_name(0)
        major, minor = torch.cuda.get_device_capability(0)
        info["capability"] = f"{major}.{minor}"
        info["gpu_count"] = torch.cuda.device_count()
        info["driver"] = _driver()
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        info["accelerators"]["xpu"] = True
        info["gpu"] = torch.xpu.get_device_name(0)
    elif torch.backends.mps.is_available():
        info["accelerators"]["metal"] = True
        info["gpu"] = "Apple MPS"
    return info


if __name__ == "__main__":
    print("PUBLISHER_DEVICE " + json.dumps(collect()))
