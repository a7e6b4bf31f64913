"""Which GitHub Actions runner builds and tests each planned variant
(resources/runners.yaml), for release.yml's job matrix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import yaml

from publisher.errors import UsageError
from publisher.plan import PlannedVariant

RUNNERS = Path(__file__).parent / "resources" / "runners.yaml"
# What a job with no runner runs on: it only reports why it cannot build.
FALLBACK_RUNNER = "ubuntu-latest"


@dataclass(frozen=True)
class RunnerTable:
    build: Mapping[str, tuple[str, str]]  # platform -> (runs-on, backend)
    gpu_test: Mapping[str, tuple[str, ...]]  # backend -> platforms tested on the GPU runner


@dataclass(frozen=True)
class RunnerJob:
    """One build job of release.yml."""

    variant: str
    backend: str  # the variant's compute backend (cpu, cuda, ...)
    platform: str
    required: bool
    runner: str  # runs-on of the build job
    build_backend: str  # publisher build --backend
    gpu_test: bool  # tested on the self-hosted GPU runner, not on `runner`
    unavailable: str  # why no runner can build it; empty when one can

    def row(self) -> dict:
        return {
            "variant": self.variant, "backend": self.backend, "platform": self.platform,
            "required": self.required, "runner": self.runner, "build_backend": self.build_backend,
            "gpu_test": self.gpu_test, "unavailable": self.unavailable,
        }


def load_runners(path: Path = RUNNERS) -> RunnerTable:
    try:
        data = yaml.safe_load(Path(path).read_text())
        build = {platform: (str(entry["runs-on"]), str(entry["backend"])) for platform, entry in data["build"].items()}
        gpu_test = {backend: tuple(platforms) for backend, platforms in (data.get("gpu-test") or {}).items()}
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        raise UsageError(f"{path}: not a runner table ({err})",
                         "each build.<platform> needs `runs-on` and `backend`; gpu-test maps a backend to platforms") from None
    return RunnerTable(build, gpu_test)


def assign(planned: PlannedVariant, table: RunnerTable) -> RunnerJob:
    platform = planned.toolchain.platform
    runner, build_backend = table.build.get(platform, (FALLBACK_RUNNER, ""))
    unavailable = "" if build_backend else (
        f"no GitHub runner builds {platform} variants (resources/runners.yaml knows {', '.join(sorted(table.build))})")
    return RunnerJob(
        variant=planned.name, backend=planned.backend, platform=platform, required=planned.required,
        runner=runner, build_backend=build_backend,
        gpu_test=platform in table.gpu_test.get(planned.backend, ()), unavailable=unavailable,
    )
