"""Entry point for reading a project. (Minimal first version: the check work
replaces the internals with full validation; keep these two signatures.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

from publisher.errors import ProjectError, UsageError
from publisher.findings import Finding, Severity, has_errors, render_human
from publisher.project.model import (
    BackendExtras,
    BuildConfig,
    Framework,
    General,
    Kernel,
    KernelDependency,
    Project,
)


def load_project(path: Path, *, layout: bool = True) -> tuple[Project | None, list[Finding]]:
    """Read `path` (a project folder or a build.toml). Returns the project
    (None when there are errors) and every finding."""
    path = Path(path)
    if path.is_dir():
        build_toml, root = path / "build.toml", path
    else:
        build_toml, root = path, None
    if not build_toml.exists():
        raise UsageError(f"{build_toml}: no such file", "pass a project folder that holds build.toml")
    data = tomllib.loads(build_toml.read_text())
    config = _config(data)
    return Project(config=config, build_toml=build_toml, root=root), []


def require_project(path: Path) -> Project:
    """Load a project folder for a later stage; errors stop the command."""
    project, findings = load_project(path)
    if project is None or has_errors(findings):
        raise ProjectError(
            "the project has errors:\n" + render_human([f for f in findings if f.severity is Severity.ERROR]),
            f"run `publisher check {path}` for details",
        )
    return project


def _deps(items) -> tuple[KernelDependency, ...]:
    return tuple(KernelDependency(d["repo-id"], d.get("version"), d.get("revision")) for d in items or ())


def _config(data: dict) -> BuildConfig:
    g = data["general"]
    extras = {
        b: BackendExtras(
            python_depends=tuple(t.get("python-depends", ())),
            kernel_depends=_deps(t.get("kernel-depends")),
            minver=t.get("minver"),
            maxver=t.get("maxver"),
        )
        for b in ("cuda", "xpu", "neuron", "tpu")
        if isinstance(t := g.get(b), dict)
    }
    hub = g.get("hub", {})
    general = General(
        name=g["name"],
        version=g["version"],
        license=g["license"],
        backends=tuple(g["backends"]),
        upstream=g.get("upstream"),
        source=g.get("source"),
        python_depends=tuple(g.get("python-depends", ())),
        kernel_depends=_deps(g.get("kernel-depends")),
        backend_extras=extras,
        hub_repo_id=hub.get("repo-id"),
        hub_branch=hub.get("branch"),
    )
    kind = next(k for k in ("torch", "torch-noarch", "tvm-ffi") if k in data)
    t = data[kind]
    stable = t.get("stable-abi", {})
    if isinstance(stable, str):
        stable = {b: stable for b in general.backends}
    framework = Framework(
        kind=kind,
        src=tuple(t.get("src", ())),
        include=tuple(t.get("include", ())),
        pyext=tuple(t.get("pyext", ("py",))),
        minver=t.get("minver"),
        maxver=t.get("maxver"),
        cxx_flags=tuple(t.get("cxx-flags", ())),
        stable_abi=dict(stable),
    )
    kernels = tuple(
        Kernel(
            name=name,
            backend=k["backend"],
            src=tuple(k["src"]),
            depends=tuple(k["depends"]),
            include=tuple(k.get("include", ())),
            cxx_flags=tuple(k.get("cxx-flags", ())),
            cuda_capabilities=tuple(k["cuda-capabilities"]) if "cuda-capabilities" in k else None,
            cuda_flags=tuple(k.get("cuda-flags", ())),
            cuda_minver=k.get("cuda-minver"),
            rocm_archs=tuple(k["rocm-archs"]) if "rocm-archs" in k else None,
            hip_flags=tuple(k.get("hip-flags", ())),
            sycl_flags=tuple(k.get("sycl-flags", ())),
        )
        for name, k in data.get("kernel", {}).items()
    )
    return BuildConfig(general=general, framework=framework, kernels=kernels, edition=g.get("edition", 4))
