"""The plan stage: matrix.yaml x build.toml -> the variants this kernel
needs, with the reason for every cell left out."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from publisher.errors import ProjectError, UsageError
from publisher.host import host_platform
from publisher.plan import arch_flags, selection
from publisher.plan.capabilities import effective_cuda_archs, effective_rocm_archs
from publisher.plan.matrix import Cell, Matrix
from publisher.plan.variants import Platform, Variant
from publisher.project.model import ARCH_BACKENDS, Project
from publisher.project.versions import parse_version, version_key, within
from publisher.toolchains.spec import ToolchainSpec


@dataclass(frozen=True)
class PlannedVariant:
    variant: Variant
    toolchain: ToolchainSpec
    required: bool  # the matrix marks the cell required (upstream policy)
    # kernel name -> effective architectures (CUDA capabilities / ROCm archs) for this toolkit
    kernel_archs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def backend(self) -> str:
        return self.variant.backend

    @property
    def archs(self) -> tuple[str, ...]:
        """Every architecture compiled into the variant (metadata backend.archs)."""
        seen: dict[str, None] = {}
        for archs in self.kernel_archs.values():
            for a in archs:
                seen.setdefault(a, None)
        return tuple(seen)


@dataclass(frozen=True)
class CellDecision:
    """One matrix cell: kept (variant set) or left out, with the rule that decided."""

    torch: str
    compute: str
    platform: str
    included: bool
    rule: str  # short stable rule id, e.g. "backend-not-declared"
    reason: str  # human sentence
    variant: str | None = None


@dataclass(frozen=True)
class BuildPlan:
    project: str
    variants: tuple[PlannedVariant, ...]
    decisions: tuple[CellDecision, ...]

    def by_name(self) -> dict[str, PlannedVariant]:
        return {p.name: p for p in self.variants}


def _kernel_archs(project: Project, matrix: Matrix, cell: Cell) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Effective architectures per kernel of the cell's backend, and the
    kernels left with none (an error `check` reports before any compile)."""
    defaults = matrix.toolkit_archs(cell)
    archs: dict[str, tuple[str, ...]] = {}
    empty: list[str] = []
    if defaults is None:
        return archs, empty
    for kernel in project.config.kernels_for(cell.backend):
        if cell.backend == "cuda" and kernel.cuda_minver and not within(cell.toolkit or "0", kernel.cuda_minver, None):
            continue  # upstream skips a kernel whose cuda-minver the toolkit does not meet
        try:
            if cell.backend == "cuda":
                found = effective_cuda_archs(kernel.cuda_capabilities, defaults)
            else:
                found = effective_rocm_archs(kernel.rocm_archs, defaults)
        except ValueError:
            found = ()
        if found:
            archs[kernel.name] = found
        else:
            empty.append(kernel.name)
    return archs, empty


def arch_flag_conflicts(project: Project, backend: str, platform: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(build.toml field, flag, CPUs it is for) for each cxx-flag of the
    backend's sources that cannot compile for `platform`."""
    config = project.config
    sources = [("torch.cxx-flags", config.framework.cxx_flags)]
    sources += [(f"kernel.{k.name}.cxx-flags", k.cxx_flags) for k in config.kernels_for(backend)]
    return [(field, flag, cpus) for field, flags in sources for flag, cpus in arch_flags.conflicts(flags, platform)]


def _spec(cell: Cell, python: str | None = None) -> ToolchainSpec:
    return ToolchainSpec(
        torch=cell.torch,
        compute=cell.compute,
        platform=cell.platform,
        index_url=cell.index_url,
        torch_requirement=cell.torch_requirement,
        python=python,
    )


def _decide(project: Project, matrix: Matrix, cell: Cell) -> tuple[CellDecision, PlannedVariant | None]:
    config = project.config
    general, framework = config.general, config.framework

    def out(rule: str, reason: str, variant: str | None = None) -> tuple[CellDecision, None]:
        return CellDecision(cell.torch, cell.compute, cell.platform, False, rule, reason, variant), None

    if cell.backend not in general.backends:
        return out("backend-not-declared", f"backend {cell.backend} is not in general.backends ({', '.join(general.backends)})")
    if project.platforms is not None and cell.platform not in project.platforms:
        return out("platform-not-selected",
                   f"platform {cell.platform} is not in publisher.toml platforms ({', '.join(project.platforms)})")
    conflicts = arch_flag_conflicts(project, cell.backend, cell.platform)
    if conflicts:
        field, flag, cpus = conflicts[0]
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        return out("arch-flags", f"{field}: {flag}{more} compiles for {'/'.join(cpus)} only, not {cell.platform}")
    if framework.kind == "tvm-ffi":
        return out("framework-unsupported", "tvm-ffi variants need a tvm-ffi release in the matrix; none is listed")
    if not within(cell.torch, framework.minver, framework.maxver):
        bounds = f"[{framework.minver or '-'}, {framework.maxver or '-'}]"
        return out("torch-bounds", f"torch {cell.torch} is outside [torch] minver/maxver {bounds}")
    if cell.backend == "cuda" and not within(cell.toolkit or "0", general.cuda.minver, general.cuda.maxver):
        bounds = f"[{general.cuda.minver or '-'}, {general.cuda.maxver or '-'}]"
        return out("cuda-bounds", f"CUDA {cell.toolkit} is outside [general.cuda] minver/maxver {bounds}")
    if cell.backend in ARCH_BACKENDS and matrix.toolkit_archs(cell) is None:
        return out("toolkit-unknown", f"matrix.yaml lists no default architectures for {cell.backend} {cell.toolkit}")
    archs, empty = _kernel_archs(project, matrix, cell)
    if empty:
        return out(
            "empty-archs",
            f"kernel(s) {', '.join(empty)}: no architecture left after intersecting with {cell.backend} {cell.toolkit} defaults",
        )
    stable = framework.stable_abi.get(cell.backend)
    if stable is not None:
        if not within(cell.torch, stable, None):
            return out("stable-abi-too-old", f"torch {cell.torch} is older than the stable ABI version {stable}")
        variant = Variant("torch-stable-abi", "{}.{}".format(*parse_version(stable)), cell.compute, Platform.parse(cell.platform))
    else:
        variant = Variant("torch", cell.torch, cell.compute, Platform.parse(cell.platform))
    planned = PlannedVariant(variant=variant, toolchain=_spec(cell), required=cell.required, kernel_archs=archs)
    decision = CellDecision(cell.torch, cell.compute, cell.platform, True, "included", "", variant.name)
    return decision, planned


def make_plan(project: Project, matrix: Matrix) -> BuildPlan:
    """Every matrix cell, in or out, and the variants to build."""
    if project.config.is_noarch:
        return _noarch_plan(project, matrix, python=None)
    decisions: list[CellDecision] = []
    variants: dict[str, PlannedVariant] = {}
    # Newest torch first, so a stable-ABI variant is built with the newest torch that has its flavour.
    for cell in sorted(matrix.cells, key=lambda c: version_key(c.torch), reverse=True):
        decision, planned = _decide(project, matrix, cell)
        if planned is not None and planned.name in variants:
            decision = CellDecision(
                cell.torch, cell.compute, cell.platform, False, "stable-abi-shared",
                f"the stable-ABI variant {planned.name} is built once, with torch {variants[planned.name].toolchain.torch}",
                planned.name,
            )
            planned = None
        decisions.append(decision)
        if planned is not None:
            variants[planned.name] = planned
    return BuildPlan(project.name, tuple(variants.values()), tuple(decisions))


def _noarch_plan(project: Project, matrix: Matrix, python: str | None) -> BuildPlan:
    """Python-only kernels: one `torch-<backend>` variant per declared backend.
    Its toolchain (for tests) is the newest matrix cell of that backend,
    preferring this machine's platform, else the newest CPU cell."""
    host = host_platform()
    ranked = sorted(matrix.cells, key=lambda c: (c.platform == host, version_key(c.torch)), reverse=True)
    variants = []
    decisions = []
    for backend in project.config.general.backends:
        variant = Variant("torch-noarch", None, backend, None)
        cell = (next((c for c in ranked if c.backend == backend), None)
                or next((c for c in ranked if c.backend == "cpu"), None)
                # every torch runs CPU code: a CUDA torch tests torch-cpu (testing.environment.can_load)
                or (ranked[0] if ranked and backend == "cpu" else None))
        if cell is None:
            raise ProjectError(
                f"the matrix has no cell whose torch can test {variant.name} (none of backend {backend} or cpu)",
                f"add a {backend} or cpu cell to the matrix, or pass --matrix with one",
            )
        variants.append(PlannedVariant(variant=variant, toolchain=_spec(cell, python), required=True))
        decisions.append(
            CellDecision(cell.torch, cell.compute, cell.platform, True, "noarch",
                         f"Python-only kernel: one {variant.name} variant serves every torch", variant.name)
        )
    return BuildPlan(project.name, tuple(variants), tuple(decisions))


def local_cell() -> Cell:
    """The cell of the interpreter running publisher (its own torch). Read
    from torch's files rather than by importing it (2 s saved per command)."""
    from publisher.toolchains.probe import probe

    found = probe()
    if "error" in found:
        raise UsageError(
            "--local builds for the torch of the running Python, but torch is not installed here",
            "install torch into this environment, or drop --local to build the matrix",
        )
    version = found["torch_version"]
    major, minor = version.split("+")[0].split(".")[:2]
    if found.get("cuda"):
        compute = "cu" + "".join(found["cuda"].split(".")[:2])
    elif found.get("hip"):
        compute = "rocm" + "".join(found["hip"].split(".")[:2])
    else:
        compute = "cpu"
    return Cell(
        torch=f"{major}.{minor}",
        compute=compute,
        platform=host_platform(),
        required=False,
        index_url=None,
        torch_requirement=f"torch=={version}",
    )


def local_plan(project: Project, matrix: Matrix) -> BuildPlan:
    """The variants of the running interpreter's torch (`--local`): its own
    flavour and, when the project declares the cpu backend and this torch is
    not a CPU build, the cpu variant of the same torch version and C++ ABI
    (every torch flavour carries the same CPU headers and libraries)."""
    if project.config.is_noarch:
        return _noarch_plan(project, matrix, python=sys.executable)
    own = local_cell()
    cells = [own]
    if own.compute != "cpu" and "cpu" in project.config.general.backends:
        cells.append(replace(own, compute="cpu"))
    decisions: list[CellDecision] = []
    variants: list[PlannedVariant] = []
    for cell in cells:
        decision, planned = _decide(project, matrix, cell)
        if planned is not None:
            planned = PlannedVariant(planned.variant, _spec(cell, sys.executable), planned.required, planned.kernel_archs)
            if not any((c.torch, c.compute, c.platform) == (cell.torch, cell.compute, cell.platform) for c in matrix.cells):
                # Built all the same (--local means this torch), but a release from this matrix will not hold it
                decision = replace(decision, rule="not-in-matrix", reason=(
                    f"the local torch {cell.torch_requirement.split('==')[-1]} ({cell.compute}, {cell.platform}) is not a "
                    f"cell of {matrix.path}: {planned.name} is built for this machine only"))
            variants.append(planned)
        decisions.append(decision)
    if not variants:
        raise ProjectError(
            f"this project has no variant for the local torch {own.torch} ({own.compute}, {own.platform}): {decisions[0].reason}",
            "build the matrix instead (drop --local), or install a torch the project supports",
        )
    return BuildPlan(project.name, tuple(variants), tuple(decisions))


def select(plan: BuildPlan, include: list[str] | tuple[str, ...] = (), skip: list[str] | tuple[str, ...] = ()) -> tuple[PlannedVariant, ...]:
    """Glob selection on variant names: any of `include` (all when empty), none of `skip`."""
    names = set(selection.chosen((p.name for p in plan.variants), include, skip))
    chosen = [p for p in plan.variants if p.name in names]
    if include and not chosen:
        names = ", ".join(p.name for p in plan.variants) or "none"
        raise UsageError(
            f"no variant matches {' '.join(include)}" + (f" (after --skip {' '.join(skip)})" if skip else ""),
            f"variants of this project: {names}",
        )
    return tuple(chosen)
