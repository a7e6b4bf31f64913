"""Which Python runs a variant's tests: the interpreter running publisher
when its torch can load the variant (what `--local` built; a CUDA torch also
runs CPU variants), else a toolchain environment that exists and can, else the
variant's toolchain environment from the plan (same torch, same CUDA major),
with `kernels`, `pytest`, the project's test dependencies, the variant's
python-depends and what kernel-builder's test shells hold undeclared added.
The running interpreter is never changed (it is the user's own environment):
what its tests declare and it lacks goes into an overlay publisher owns
(testing.overlay)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from publisher import distribution, runner
from publisher.errors import EnvironmentProblem, ToolchainUnavailable
from publisher.host import host_platform
from publisher.plan.planner import PlannedVariant
from publisher.plan.resolver import System, resolve
from publisher.plan.variants import Variant
from publisher.testing.overlay import ensure_overlay
from publisher.testing.test_depends import implicit_test_depends


def runner_packages() -> list[str]:
    """What a test environment needs: the `kernels` client we build for, at our pin, and pytest."""
    return [distribution.requirement(name) for name in ("kernels", "pytest", "pytest-timeout")]


REQUIRED_MODULES = ("kernels", "pytest")


@dataclass(frozen=True)
class TestEnvironment:
    __test__ = False  # not a pytest test class

    python: str
    origin: str  # shown to the user: where the interpreter comes from
    publisher_made: bool = False  # publisher made it (and installs what the tests need into it)
    overlay: str | None = None  # publisher's folder of what the tests need and `python` lacks (testing.overlay)


def torch_compute(info: dict) -> tuple[str, str] | None:
    """(backend, compute) of a torch described by publisher.toolchains.probe."""
    if info.get("cuda"):
        major, minor = info["cuda"].split(".")[:2]
        return "cuda", f"cu{major}{minor}"
    if info.get("hip"):
        major, minor = info["hip"].split(".")[:2]
        return "rocm", f"rocm{major}{minor}"
    if info.get("xpu"):
        return "xpu", f"xpu{info['xpu'][0:4]}{info['xpu'][5:6]}"
    return ("cpu", "cpu") if info.get("torch_version") else None


def selectable_computes(info: dict) -> list[str]:
    """The backends `kernels` lets this torch load variants for: the one torch
    was built for, and `cpu`, which every torch runs (kernels 0.17
    `_supported_backends`; `get_kernel(..., backend="cpu")`)."""
    compute = torch_compute(info)
    return list(dict.fromkeys([compute[1], "cpu"])) if compute else []


def can_load(variant: Variant, info: dict, platform: str) -> bool:
    """Can the torch described by `info` (publisher.toolchains.probe) load and
    run `variant` on `platform`, with any backend `kernels` lets it select?
    A CUDA torch runs a `cpu` variant of its torch version and ABI, and `torch-cpu`."""
    if not info.get("torch_version"):
        return False
    torch_minor = ".".join(info["torch_version"].split("+")[0].split(".")[:2])
    return any(
        variant.name in resolve([variant.name], System(torch_minor, compute, platform, info.get("cxx11_abi"))).accepted
        for compute in selectable_computes(info)
    )


@lru_cache(maxsize=1)
def _this_interpreter() -> dict:
    from publisher.toolchains.probe import probe

    return probe()


def missing_modules() -> list[str]:
    return [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]


def select_environment(
    variant: Variant, planned_for: Callable[[], PlannedVariant | None], on_line: Callable[[str], None],
    test_depends: Sequence[str] = (), kernel_depends: Sequence[str] = (),
) -> TestEnvironment:
    """The environment to test `variant` in; `planned_for` looks the variant up
    in the plan (only when this interpreter cannot load it); `test_depends`:
    the project's declared test dependencies (testing.test_depends); `kernel_depends`:
    the variant's own python-depends, without which `kernels` does not load it.
    Raises EnvironmentProblem with the reason when there is none."""
    info = _this_interpreter()
    if can_load(variant, info, host_platform()):
        missing = missing_modules()
        if missing:
            raise EnvironmentProblem(
                f"{', '.join(missing)} not installed for {sys.executable}, which runs this variant's tests",
                f"{sys.executable} -m pip install {' '.join(repr(p) for p in runner_packages())}",
            )
        # what the kernel (python-depends: `kernels` does not load it without) and its declared tests need goes
        # into publisher's overlay, never into this interpreter: the user's own environment
        overlay = ensure_overlay([*kernel_depends, *test_depends], on_line)
        return TestEnvironment(sys.executable, f"this interpreter (torch {info['torch_version']})",
                               overlay=str(overlay) if overlay else None)
    from publisher.toolchains.provision import ensure_packages, ensure_toolchain, recorded_toolchains

    # An environment that exists and loads the variant (a CUDA torch runs a CPU
    # variant of its torch) saves downloading the plan's.
    toolchain = next((t for t in recorded_toolchains() if can_load(variant, _probe(t.python), host_platform())), None)
    if toolchain is None:
        planned = planned_for()
        if planned is None:
            raise EnvironmentProblem(
                f"no environment for {variant.name}: this interpreter's torch ({info.get('torch_version', 'none')}) "
                "cannot load it and the matrix has no cell for it",
                "run publisher with a torch that matches the variant, or pass --matrix with a cell for it",
            )
        try:
            toolchain = ensure_toolchain(planned.toolchain, on_line)
        except ToolchainUnavailable as err:
            raise ToolchainUnavailable(
                f"no torch here can run {variant.name} and its environment cannot be made: {err.reason}"
            ) from None
    ensure_packages(toolchain, [*runner_packages(), *test_depends, *kernel_depends], on_line)
    # what kernel-builder's test shells hold undeclared goes only into environments publisher made, and
    # only as far as it installs: a test that imports a missing one says so (run_variant)
    implicit = implicit_test_depends(variant.compute, host_platform()) if toolchain.env_dir is not None else ()
    if implicit:
        try:
            ensure_packages(toolchain, implicit, on_line)
        except ToolchainUnavailable as err:
            on_line(f"note: {err.reason}; kernel-builder's test environments hold them, tests importing them will "
                    "say what is missing")
    return TestEnvironment(str(toolchain.python), f"toolchain {toolchain.key}", toolchain.env_dir is not None)


def _probe(python: str) -> dict:
    """What torch `python` has (publisher.toolchains.probe: reads files, imports nothing heavy)."""
    from publisher.toolchains import probe as toolchain_probe

    result = runner.run([python, toolchain_probe.__file__], timeout=120)
    try:
        return json.loads(result.output.strip().splitlines()[-1]) if result.ok else {}
    except (ValueError, IndexError):
        return {}
