"""`check`'s view of the platform rules of the plan (plan.arch_flag_conflicts):
an architecture-specific flag (-mavx2, -march=armv8-a+sve, ...) meeting a
platform of the matrix it cannot compile for is a warning (PB502); the plan
leaves those cells out with the same reason."""

from __future__ import annotations

from pathlib import Path

from publisher.codes import finding
from publisher.findings import Finding
from publisher.plan.matrix import find_matrix, load_matrix
from publisher.project.model import Project
from publisher.project.settings import FILE_NAME


def platform_findings(project: Project, matrix_path: Path | None) -> list[Finding]:
    from publisher.plan.planner import arch_flag_conflicts

    if project.config.is_noarch:
        return []
    matrix = load_matrix(find_matrix(project.root, matrix_path))
    # (field, CPUs the flags are for) -> (flags, {backend: platforms they meet})
    found: dict[tuple[str, tuple[str, ...]], tuple[dict[str, None], dict[str, set[str]]]] = {}
    for cell in matrix.cells:
        if cell.backend not in project.config.general.backends:
            continue
        if project.platforms is not None and cell.platform not in project.platforms:
            continue
        for field, flag, cpus in arch_flag_conflicts(project, cell.backend, cell.platform):
            flags, met = found.setdefault((field, cpus), ({}, {}))
            flags[flag] = None
            met.setdefault(cell.backend, set()).add(cell.platform)
    out = []
    for (field, cpus), (flags, met) in sorted(found.items()):
        where = "; ".join(f"{backend} on {', '.join(sorted(platforms))}" for backend, platforms in sorted(met.items()))
        keep = sorted({c.platform for c in matrix.cells if c.platform.partition("-")[0] in cpus})
        names = ", ".join(f"`{f}`" for f in flags)
        out.append(finding(
            "PB502", f"{names} compile{'s' if len(flags) == 1 else ''} for {'/'.join(cpus)} only; "
                     f"the plan leaves out the variants for {where}",
            field=field,
            hint=f"to say so, set platforms = {keep!r} in {FILE_NAME}".replace("'", '"')
                 + " (the warning goes away), or drop the flags",
        ))
    return out
