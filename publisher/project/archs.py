"""GPU architecture checks: every capability/arch a kernel names must exist,
and for every toolkit the kernel is built with, the effective set (computed
as upstream CMake does, see publisher.plan.capabilities) must not be empty.
Upstream only finds these problems at CMake configure time, per variant."""

from __future__ import annotations

from collections.abc import Mapping

from publisher.codes import finding
from publisher.findings import Finding
from publisher.plan.capabilities import (
    effective_cuda_archs,
    effective_rocm_archs,
    is_known_capability,
    is_known_rocm_arch,
    is_wellformed_capability,
    parse_capability,
)
from publisher.project.versions import within

Toolkits = Mapping[str, tuple[str, ...]]


def _strs(value: object) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, str)]


def _table(data: Mapping, key: str) -> Mapping:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _supported(toolkits: Toolkits) -> str:
    return "; ".join(f"{version}: {' '.join(archs)}" for version, archs in toolkits.items())


def check_archs(data: Mapping, cuda_toolkits: Toolkits, rocm_toolkits: Toolkits) -> list[Finding]:
    out: list[Finding] = []
    general = _table(data, "general")
    backends = _strs(general.get("backends")) or []
    cuda_bounds = _table(general, "cuda")
    noarch = _table(data, "torch-noarch")
    _unknown_cuda(_strs(noarch.get("cuda_capabilities")) or [], "torch-noarch.cuda_capabilities", "[torch-noarch]", cuda_toolkits, out)
    _unknown_rocm(_strs(noarch.get("rocm_archs")) or [], "torch-noarch.rocm_archs", "[torch-noarch]", rocm_toolkits, out)
    for name, kernel in _table(data, "kernel").items():
        if not isinstance(kernel, Mapping):
            continue
        backend = kernel.get("backend")
        if backend == "cuda":
            toolkits = {v: d for v, d in cuda_toolkits.items()
                        if within(v, cuda_bounds.get("minver"), cuda_bounds.get("maxver"))
                        and within(v, kernel.get("cuda-minver"), None)}
            _cuda_kernel(str(name), kernel, toolkits, cuda_toolkits, "cuda" in backends, out)
        elif backend == "rocm":
            _rocm_kernel(str(name), kernel, rocm_toolkits, "rocm" in backends, out)
    return out


def _unknown_cuda(caps: list[str], path: str, who: str, toolkits: Toolkits, out: list[Finding]) -> list[str]:
    """Report capabilities that do not exist; return the well-formed ones
    (an unknown but well-formed one still takes part in the intersection)."""
    usable = [cap for cap in caps if is_wellformed_capability(cap)]
    for cap in caps:
        try:
            parse_capability(cap)
        except ValueError as err:
            out.append(finding("PB301", f"{who}: {err}", field=path,
                               hint=f"use capabilities the toolkits build (supported per CUDA toolkit: {_supported(toolkits)})"))
    return usable


def _unknown_rocm(archs: list[str], path: str, who: str, toolkits: Toolkits, out: list[Finding]) -> None:
    for arch in archs:
        if not is_known_rocm_arch(arch):
            out.append(finding("PB303", f"{who}: unknown ROCm architecture `{arch}`", field=path,
                               hint=f"use gfx names the toolkits build (supported per ROCm toolkit: {_supported(toolkits)})"))


def _cuda_kernel(name: str, kernel: Mapping, toolkits: Toolkits, all_toolkits: Toolkits, built: bool,
                 out: list[Finding]) -> None:
    path = f"kernel.{name}.cuda-capabilities"
    caps = _strs(kernel.get("cuda-capabilities"))
    usable = _unknown_cuda(caps or [], path, f"kernel `{name}`", all_toolkits, out)
    if not built:
        return
    if not toolkits:
        out.append(finding("PB307", f"kernel `{name}`: no CUDA toolkit in the matrix satisfies its version bounds; it is never built",
                           field=f"kernel.{name}", hint="check [general.cuda] minver/maxver and the kernel's cuda-minver "
                           "(bounds compare whole versions, as upstream: maxver \"12\" admits 12.0, not 12.8)"))
        return
    per_toolkit: dict[str, tuple[str, ...]] = {}
    for version, defaults in toolkits.items():
        effective = effective_cuda_archs(tuple(usable), defaults) if usable else (() if caps else defaults)
        if not effective:
            out.append(finding("PB302", f"kernel `{name}`: no capability left for CUDA {version} (kernel lists "
                               f"{' '.join(caps or []) or 'nothing usable'}; CUDA {version} supports {' '.join(defaults)})",
                               field=path, hint="add a capability this toolkit supports, or raise [general.cuda] minver / the kernel's cuda-minver"))
        per_toolkit[version] = effective
    _report(name, "CUDA", per_toolkit, out, path)
    built_any = {a for archs in per_toolkit.values() for a in archs}
    for cap in usable:
        if cap not in built_any and is_known_capability(cap):
            out.append(finding("PB306", f"kernel `{name}`: capability {cap} is compiled by no CUDA toolkit in the matrix",
                               field=path, hint=f"remove it or check the intended capability (per toolkit: {_supported(toolkits)})"))


def _rocm_kernel(name: str, kernel: Mapping, toolkits: Toolkits, built: bool, out: list[Finding]) -> None:
    path = f"kernel.{name}.rocm-archs"
    archs = _strs(kernel.get("rocm-archs"))
    _unknown_rocm(archs or [], path, f"kernel `{name}`", toolkits, out)
    if not built or not toolkits:
        return
    per_toolkit: dict[str, tuple[str, ...]] = {}
    for version, defaults in toolkits.items():
        effective = effective_rocm_archs(tuple(archs) if archs else None, defaults)
        if not effective:
            out.append(finding("PB304", f"kernel `{name}`: no architecture left for ROCm {version} (kernel lists "
                               f"{' '.join(archs or [])}; ROCm {version} supports {' '.join(defaults)})",
                               field=path, hint="add an architecture this toolkit supports"))
        per_toolkit[version] = effective
    _report(name, "ROCm", per_toolkit, out, path)
    built_any = {a for found in per_toolkit.values() for a in found}
    for arch in archs or []:
        if arch not in built_any and is_known_rocm_arch(arch):
            out.append(finding("PB306", f"kernel `{name}`: architecture {arch} is compiled by no ROCm toolkit in the matrix",
                               field=path, hint=f"remove it (supported: {_supported(toolkits)})"))


def _report(name: str, what: str, per_toolkit: dict[str, tuple[str, ...]], out: list[Finding], path: str) -> None:
    text = "; ".join(f"{what} {v}: {' '.join(a) or '(none)'}" for v, a in per_toolkit.items())
    out.append(finding("PB305", f"kernel `{name}` compiles for {text}", field=path.rsplit(".", 1)[0]))
