"""Which variant `kernels.get_kernel` loads in a given environment, decided
by the real `kernels` resolver with the environment's parameters spelled
out (rather than read from the running machine). The test stage asks it
which torch can load a variant; push's verify asks it for every matrix cell."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class System:
    """An environment that loads kernels: its torch, compute flavour and platform."""

    torch: str  # "2.15"
    compute: str  # cpu, cu130, rocm71, xpu20253, metal
    platform: str  # x86_64-linux
    cxx11_abi: bool | None = True  # every torch 2.x Linux wheel; None: unknown (a cxx11 variant is not assumed to load)

    @property
    def label(self) -> str:
        return f"torch {self.torch} {self.compute} {self.platform}"


@dataclass(frozen=True)
class Resolution:
    accepted: tuple[str, ...]  # variant names `kernels` would load, best first
    reason: str  # why none was (the resolver's first rejection), or "" when one was


def warm() -> None:
    """Import what resolve() needs (a push does it while it waits for the Hub);
    without `kernels` installed, resolve() says so later."""
    try:
        import kernels.backends  # noqa: F401
        import kernels.variants  # noqa: F401
    except ImportError:
        pass


def resolve(variant_names: Iterable[str], system: System) -> Resolution:
    # Imported here: `kernels` pulls in huggingface_hub (~1 s), needed only when asked
    from kernels.backends import parse_backend
    from kernels.variants import _resolve_variant_for_system, parse_variant
    from packaging.version import Version

    parsed = []
    for name in variant_names:
        try:
            parsed.append(parse_variant(name))
        except ValueError:
            continue  # not a variant name `kernels` knows: it never loads it
    cpu, _, os = system.platform.partition("-")
    accepted, trace = _resolve_variant_for_system(
        variants=parsed,
        selected_backend=parse_backend(system.compute),
        cpu=cpu,
        os=os,
        torch_version=Version(system.torch),
        torch_cxx11_abi=system.cxx11_abi if os == "linux" else None,
        tvm_ffi_version=None,
        macos_version=Version("26.0") if os == "darwin" else None,
    )
    if accepted:
        return Resolution(tuple(v.variant_str for v in accepted), "")
    return Resolution((), trace[0].reason if trace else "no variants")
