"""Which GitHub Actions runner builds and tests each planned variant
(resources/runners.yaml), for release.yml's job matrix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from publisher.data import data_path
from publisher.errors import UsageError
from publisher.plan.planner import PlannedVariant

RUNNERS = data_path("runners.yaml")
# What a job with no runner runs on: it only reports why it cannot build.
FALLBACK_RUNNER = "ubuntu-latest"
HERE, GPU_RUNNER, NONE = "here", "gpu-runner", "none"
WHERE = (HERE, GPU_RUNNER, NONE)
_HINT = ("each build.<platform> needs `runs-on` and `backend`; test.<backend>.<platform> is "
         f"{', '.join(WHERE)}")


@dataclass(frozen=True)
class RunnerTable:
    build: Mapping[str, tuple[str, str]]  # platform -> (runs-on, backend)
    test: Mapping[str, Mapping[str, str]]  # backend -> platform -> here | gpu-runner | none

    def where_tested(self, backend: str, platform: str) -> str:
        """Unlisted cells are tested on their build runner (and fail there without the hardware)."""
        return self.test.get(backend, {}).get(platform, HERE)


@dataclass(frozen=True)
class RunnerJob:
    """One build job of release.yml."""

    variant: str
    backend: str  # the variant's compute backend (cpu, cuda, ...)
    platform: str
    required: bool
    runner: str  # runs-on of the build job
    build_backend: str  # publisher build --backend
    test: str  # where its tests run: here | gpu-runner | none (load check only)
    unavailable: str  # why no runner can build it; empty when one can

    @property
    def gpu_test(self) -> bool:
        return self.test == GPU_RUNNER

    def row(self) -> dict:
        return {
            "variant": self.variant, "backend": self.backend, "platform": self.platform,
            "required": self.required, "runner": self.runner, "build_backend": self.build_backend,
            "gpu_test": self.gpu_test, "test": self.test, "unavailable": self.unavailable,
        }


def load_runners(path: Path = RUNNERS) -> RunnerTable:
    try:
        data = yaml.safe_load(Path(path).read_text())
        build = {platform: (str(entry["runs-on"]), str(entry["backend"])) for platform, entry in data["build"].items()}
        test = {str(backend): {str(platform): str(where) for platform, where in platforms.items()}
                for backend, platforms in (data.get("test") or {}).items()}
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise UsageError(f"{path}: not a runner table ({err})", _HINT) from None
    wrong = [f"test.{b}.{p}: {w!r}" for b, platforms in test.items() for p, w in platforms.items() if w not in WHERE]
    if wrong:
        raise UsageError(f"{path}: {'; '.join(wrong)} is not one of {', '.join(WHERE)}", _HINT)
    return RunnerTable(build, test)


def assign(planned: PlannedVariant, table: RunnerTable) -> RunnerJob:
    platform = planned.toolchain.platform
    runner, build_backend = table.build.get(platform, (FALLBACK_RUNNER, ""))
    unavailable = "" if build_backend else (
        f"no GitHub runner builds {platform} variants (resources/runners.yaml knows {', '.join(sorted(table.build))})")
    return RunnerJob(
        variant=planned.name, backend=planned.backend, platform=platform, required=planned.required,
        runner=runner, build_backend=build_backend,
        test=table.where_tested(planned.backend, platform), unavailable=unavailable,
    )
