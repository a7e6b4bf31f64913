"""On which GPUs `kernels` loads a variant: its `backend.archs` judged by the
client's own rule (kernels/archs.py: `X.Ya` that capability only, `X.Yf` and
plain `X.Y` the same major from that minor on, `+PTX` any capability from
there), for each GPU of resources/gpus.yaml."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from publisher.data import read_yaml


@dataclass(frozen=True)
class Gpu:
    name: str
    capability: tuple[int, int]


@cache
def cuda_gpus() -> tuple[Gpu, ...]:
    return tuple(Gpu(g["name"], tuple(int(p) for p in g["capability"].split("."))) for g in read_yaml("gpus.yaml")["cuda"])


def cuda_coverage(archs: tuple[str, ...]) -> tuple[tuple[Gpu, ...], tuple[Gpu, ...]]:
    """(GPUs `kernels` loads a CUDA variant with these archs on, GPUs it refuses it on). No archs:
    the client checks nothing, so every GPU."""
    from kernels.archs import _supports_cuda_capability  # the client's rule, not a copy of it

    gpus = cuda_gpus()
    if not archs:
        return gpus, ()
    loads = tuple(g for g in gpus if _supports_cuda_capability(list(archs), g.capability))
    return loads, tuple(g for g in gpus if g not in loads)


def loads_on(backend: str, archs: tuple[str, ...]) -> str:
    """The card's words for where a variant loads."""
    if backend == "cpu":
        return "any CPU"
    if backend != "cuda":
        return "-"
    loads, refused = cuda_coverage(archs)
    if not loads:
        return "none of " + ", ".join(g.name for g in refused)
    return ", ".join(g.name for g in loads) + (f" (not {', '.join(g.name for g in refused)})" if refused else "")
