"""The files of a new kernel project, rendered from publisher/resources/scaffold/:
one op, `silu`, with a kernel per chosen backend (cpu: C++; cuda: a .cu file,
which the ROCm build turns into HIP for rocm, as upstream's own examples do),
tests against a float64 reference, a benchmark in `kernels benchmark`'s form,
a card template and a .gitignore. The release workflow is workflow.py's."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from publisher.consumer import LoadCall, benchmark_commands
from publisher.data import data_path
from publisher.scaffold.names import KernelNames

OFFERED_BACKENDS = ("cpu", "cuda", "rocm")  # the backends with a kernel template here
DEFAULT_BACKENDS = ("cpu", "cuda")  # both build from PyPI toolchains; the cpu variant tests on any machine


@dataclass(frozen=True)
class Implementation:
    """One implementation of the op in torch_binding.cpp: the C++ function, the dispatch key it
    registers under, and the compile definitions (one per backend) that select it."""

    symbol: str
    dispatch_key: str
    backends: tuple[str, ...]

    @property
    def condition(self) -> str:
        return " || ".join(f"defined({backend.upper()}_KERNEL)" for backend in self.backends)


# template -> file of the project ({python_name} filled in), and the backends that need it (None: all)
_FILES: tuple[tuple[str, str, tuple[str, ...] | None], ...] = (
    ("build.toml.j2", "build.toml", None),
    ("torch-ext/torch_binding.h.j2", "torch-ext/torch_binding.h", None),
    ("torch-ext/torch_binding.cpp.j2", "torch-ext/torch_binding.cpp", None),
    ("torch-ext/__init__.py.j2", "torch-ext/{python_name}/__init__.py", None),
    ("kernel_cpu/silu.cpp.j2", "silu_cpu/silu.cpp", ("cpu",)),
    ("kernel_cuda/silu.cu.j2", "silu_cuda/silu.cu", ("cuda", "rocm")),
    ("tests/conftest.py.j2", "tests/conftest.py", None),
    ("tests/test_silu.py.j2", "tests/test_silu.py", None),
    ("benchmarks/benchmark.py.j2", "benchmarks/benchmark.py", None),
    ("CARD.md.j2", "CARD.md", None),
    ("gitignore.j2", ".gitignore", None),
)


@cache
def environment():
    import jinja2  # here: options.py reads this module's backends on every command

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_path("scaffold"))),
        undefined=jinja2.StrictUndefined,  # a value the code forgot to pass is a bug, not an empty string
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render(template: str, values: dict) -> str:
    return environment().get_template(template).render(**values)


def implementations(backends: tuple[str, ...]) -> list[Implementation]:
    gpu = tuple(b for b in ("cuda", "rocm") if b in backends)  # ROCm torch dispatches GPU tensors as CUDA
    out = [Implementation("silu_cpu", "CPU", ("cpu",))] if "cpu" in backends else []
    return out + ([Implementation("silu_cuda", "CUDA", gpu)] if gpu else [])


def project_files(names: KernelNames, backends: tuple[str, ...], license: str) -> dict[str, str]:
    """Project-relative path -> text of every file of the new project but its workflow."""
    values = {
        "name": names.name,
        "repo_id": names.repo_id,
        "python_name": names.python_name,
        "class_name": names.class_name,
        "module_var": names.module_var,
        "license": license,
        "backends": backends,
        "impls": implementations(backends),
        "rocm": "rocm" in backends,
        "backends_text": _backends_text(backends),
        "example_device": "cuda" if {"cuda", "rocm"} & set(backends) else "cpu",
        # the tests load version 1 (build.toml's) as users whose Hub may not trust the owner do
        "load_call": LoadCall(names.repo_id, 1).render(prefix="kernels."),
        "load_call_why": LoadCall(names.repo_id, 1).why(),
        "benchmark_commands": benchmark_commands(names.repo_id, 1)[1:],  # kernels[benchmark] is there already
    }
    return {
        target.format(python_name=names.python_name): render(template, values)
        for template, target, needed_by in _FILES
        if needed_by is None or set(needed_by) & set(backends)
    }


def _backends_text(backends: tuple[str, ...]) -> str:
    shown = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm"}
    names = [shown[b] for b in backends]
    return " for " + (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0])
