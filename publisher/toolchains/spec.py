"""What a variant's build environment is made of, as the matrix says it
(the plan stage fills these in; the build stage obtains them)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ToolchainSpec:
    torch: str  # minor release, "2.15"
    compute: str  # cpu, cu130, rocm71, xpu20252, metal
    platform: str  # x86_64-linux ...
    index_url: str | None  # None = the PyPI default wheel
    torch_requirement: str  # pip requirement, e.g. "torch==2.15.*"
    extra_requirements: tuple[str, ...] = ()  # e.g. nvidia-cuda-nvcc for a CUDA compiler
    python: str | None = None  # use this existing interpreter (--local) instead of creating an env

    @property
    def key(self) -> str:
        """Stable identity: two variants with the same key share one environment."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return f"torch{self.torch.replace('.', '')}-{self.compute}-{self.platform}-{hashlib.sha256(blob).hexdigest()[:10]}"
