"""The plan stage as a call: the variants a project needs, selected as the
options say, with the decision on every matrix cell. Used by `publisher matrix`."""

from __future__ import annotations

from dataclasses import dataclass

from publisher.options import MatrixOptions
from publisher.plan.github_runners import assign, load_runners
from publisher.plan.matrix import Matrix, find_matrix, load_matrix
from publisher.plan.planner import BuildPlan, PlannedVariant, make_plan, select
from publisher.project.load import require_project
from publisher.project.model import Project


@dataclass(frozen=True)
class MatrixResult:
    project: Project
    matrix: Matrix
    plan: BuildPlan  # every cell, in or out, with the rule that decided it
    chosen: tuple[PlannedVariant, ...]  # the selected variants

    def github_jobs(self) -> list[dict]:
        """release.yml's build jobs: each chosen variant with the runner and backend that build it."""
        runners = load_runners()
        return [assign(p, runners).row() for p in self.chosen]


def run_matrix(options: MatrixOptions) -> MatrixResult:
    path = options.path
    matrix_path = find_matrix(path if path.is_dir() else None, options.matrix_file)
    project = require_project(path, matrix=matrix_path)
    matrix = load_matrix(matrix_path)
    plan = make_plan(project, matrix)
    chosen = [p for p in select(plan, options.selection.include, options.selection.skip)
              if p.required or not options.required_only]
    return MatrixResult(project, matrix, plan, tuple(chosen))
