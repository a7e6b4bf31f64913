"""Is a release complete? The required variants are those the plan builds from
the matrix cells marked `required` (upstream policy), for the backends the
kernel declares (`general.backends`; `torch-<backend>` for Python-only
kernels) and the platforms it is built for. `push` and `release` both ask
here; a release lacking any of them is refused unless `--partial` says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from publisher import codes
from publisher.findings import Finding, Severity
from publisher.plan.matrix import Cell, Matrix
from publisher.plan.planner import make_plan
from publisher.project.model import Project

ANY_PLATFORM = "any platform"  # Python-only variants serve every platform


@dataclass(frozen=True)
class Coverage:
    required: tuple[str, ...]
    missing: tuple[tuple[str, tuple[str, ...]], ...]  # (platform, missing variants), platforms sorted

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def missing_names(self) -> tuple[str, ...]:
        return tuple(n for _, names in self.missing for n in names)

    def listing(self) -> str:
        return "; ".join(f"{platform}: {', '.join(names)}" for platform, names in self.missing)

    def finding(self, partial: bool, where: str) -> Finding | None:
        """PP201: an error without --partial, a warning with it; None when complete."""
        if self.complete:
            return None
        count = len(self.missing_names)
        message = f"the release lacks {count} of {len(self.required)} required variant(s) — {self.listing()}"
        if partial:
            return codes.finding("PP201", message, severity=Severity.WARNING, file=where,
                           hint="published with --partial; the card and the resolution table list what is missing")
        return codes.finding("PP201", message, file=where,
                       hint="build and test the missing variants (publisher build, then publisher test; GPU variants on a machine "
                            "with that GPU or with publisher test --on hf-jobs:FLAVOR), or pass --partial to publish only what is here")


def required_variants(project: Project, matrix: Matrix) -> dict[str, str]:
    """Required variant name -> its platform (ANY_PLATFORM for Python-only variants)."""
    return {p.name: str(p.variant.platform) if p.variant.platform else ANY_PLATFORM
            for p in make_plan(project, matrix).variants if p.required}


def check(project: Project, matrix: Matrix, present: Iterable[str]) -> Coverage:
    """`present`: the variants this release will hold (pushed now, or kept on the branch)."""
    required = required_variants(project, matrix)
    have = set(present)
    by_platform: dict[str, list[str]] = {}
    for name, platform in sorted(required.items()):
        if name not in have:
            by_platform.setdefault(platform, []).append(name)
    return Coverage(tuple(sorted(required)), tuple((p, tuple(n)) for p, n in sorted(by_platform.items())))


def targeted_cells(project: Project, matrix: Matrix) -> tuple[Cell, ...]:
    """The matrix cells the kernel is built for: its declared backends, minus the
    cells the plan leaves out (torch bounds, platforms...). What the resolution
    table covers."""
    declared = [c for c in matrix.cells if c.backend in project.config.general.backends]
    if project.config.is_noarch:
        return tuple(declared)
    kept = {(d.torch, d.compute, d.platform) for d in make_plan(project, matrix).decisions
            if d.included or d.rule == "stable-abi-shared"}
    return tuple(c for c in declared if (c.torch, c.compute, c.platform) in kept)
