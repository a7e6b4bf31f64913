"""Turn a validated edition-5-shaped mapping into the frozen model. Only
called when validation found no errors, so shapes can be trusted here."""

from __future__ import annotations

from collections.abc import Mapping

from publisher.project.model import BackendExtras, BuildConfig, Framework, General, Kernel, KernelDependency

_FRAMEWORKS = ("torch", "torch-noarch", "tvm-ffi")


def _deps(items) -> tuple[KernelDependency, ...]:
    return tuple(KernelDependency(d["repo-id"], d.get("version"), d.get("revision")) for d in items or ())


def _opt(value) -> tuple[str, ...] | None:
    return tuple(value) if value is not None else None


def to_config(data: Mapping, edition: int) -> BuildConfig:
    g = data["general"]
    extras = {
        b: BackendExtras(
            python_depends=tuple(t.get("python-depends", ())),
            kernel_depends=_deps(t.get("kernel-depends")),
            minver=t.get("minver"),
            maxver=t.get("maxver"),
        )
        for b in ("cuda", "xpu", "neuron", "tpu")
        if isinstance(t := g.get(b), Mapping)
    }
    hub = g.get("hub", {})
    general = General(
        name=g["name"],
        version=g["version"],
        license=g["license"],
        backends=tuple(dict.fromkeys(g["backends"])),
        upstream=g.get("upstream"),
        source=g.get("source"),
        python_depends=tuple(g.get("python-depends", ())),
        kernel_depends=_deps(g.get("kernel-depends")),
        backend_extras=extras,
        hub_repo_id=hub.get("repo-id"),
        hub_branch=hub.get("branch"),
    )
    kind = next(k for k in _FRAMEWORKS if k in data)
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
        cuda_capabilities=_opt(t.get("cuda_capabilities")),
        rocm_archs=_opt(t.get("rocm_archs")),
    )
    kernels = tuple(
        Kernel(
            name=name,
            backend=k["backend"],
            src=tuple(k["src"]),
            depends=tuple(k["depends"]),
            include=tuple(k.get("include", ())),
            cxx_flags=tuple(k.get("cxx-flags", ())),
            cuda_capabilities=_opt(k.get("cuda-capabilities")) or None,
            cuda_flags=tuple(k.get("cuda-flags", ())),
            cuda_minver=k.get("cuda-minver"),
            rocm_archs=_opt(k.get("rocm-archs")) or None,
            hip_flags=tuple(k.get("hip-flags", ())),
            sycl_flags=tuple(k.get("sycl-flags", ())),
        )
        for name, k in data.get("kernel", {}).items()
    )
    return BuildConfig(general=general, framework=framework, kernels=kernels, edition=edition)
