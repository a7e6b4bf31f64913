"""Compile one variant's extension: every `[torch].src` and kernel `src` of
the variant's backend, with ninja, into `<ops_id>.abi3.so` in the work dir."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import ninja

from publisher import runner
from publisher.builder import depends, flags, glibc_compat
from publisher.builder.backend import LineSink
from publisher.builder.inputs import project_files
from publisher.builder.jobserver import JobServer
from publisher.builder.ninja_file import Compile, NinjaBuild, render, write_if_changed
from publisher.data import DATA_DIR
from publisher.errors import BuildFailed
from publisher.plan.capabilities import cuda_target_dirs
from publisher.plan.planner import PlannedVariant
from publisher.project.model import ARCH_BACKENDS, Project
from publisher.toolchains.provision import Toolchain

RESOURCES = DATA_DIR
_CXX = {".cpp", ".cc", ".cxx", ".c++", ".C"}
_HEADERS = {".h", ".hh", ".hpp", ".hxx", ".cuh", ".inc", ".inl", ".ipp", ".tcc"}


def cuda_include_dirs(cuda_home: str, platform: str) -> list[str]:
    """The toolkit's include/ and its targets/<platform folder>/include (x86_64-linux, or
    sbsa-linux on aarch64 servers): builds run natively, so the toolkit is the platform's."""
    home = Path(cuda_home)
    target = next((t for name in cuda_target_dirs(platform) if (t := home / "targets" / name / "include").is_dir()), None)
    return [str(p) for p in (home / "include", target) if p is not None and p.is_dir()]


def device_archs(project: Project, planned: PlannedVariant) -> tuple[str, ...]:
    """The capabilities the variant's library carries GPU code for (metadata.json's backend.archs): those
    of its kernels with CUDA sources; a CUDA kernel of C++ sources alone (calling CUDA libraries) has none."""
    seen: dict[str, None] = {}
    for kernel in project.config.kernels_for(planned.backend):
        if any(src.endswith(".cu") for src in kernel.src):
            seen.update(dict.fromkeys(planned.kernel_archs.get(kernel.name, ())))
    return tuple(seen)


def compile_variant(
    project: Project,
    planned: PlannedVariant,
    toolchain: Toolchain,
    ops_id: str,
    work_dir: Path,
    *,
    jobserver: JobServer,
    cores: int,
    debug: bool,
    log: Path,
    on_line: LineSink,
) -> Path:
    """Returns the linked library (in the work dir)."""
    assert project.root is not None
    root = project.root.resolve()
    backend = planned.backend
    work_dir.mkdir(parents=True, exist_ok=True)
    gen = work_dir / "include"
    gen.mkdir(exist_ok=True)
    for name in ("registration.h", "glibc_compat.c"):
        write_if_changed(gen / name, (RESOURCES / name).read_text())
    write_if_changed(gen / "glibc_compat.h", glibc_compat.header_text())

    stable = project.config.framework.stable_abi.get(backend)
    if stable and planned.variant.framework != "torch-stable-abi":
        stable = None
    base_defines = flags.defines(backend, stable)
    header_names_ops = any(flags.OPS_MACRO.encode() in path.read_bytes()
                           for path in project_files(project) if path.suffix in _HEADERS)
    # glibc_compat.c, linked into the library, defines what the header cannot bind to an older glibc symbol
    compat = ["-include", str(gen / "glibc_compat.h")]
    system_includes = [*toolchain.include_dirs, toolchain.python_include]
    cuda_includes = cuda_include_dirs(toolchain.cuda_home, planned.toolchain.platform) if toolchain.cuda_home else []

    fw = project.config.framework
    units: list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = [
        (src, fw.include, fw.cxx_flags, (), ()) for src in fw.src
    ]
    for kernel in project.config.kernels_for(backend):
        if backend in ARCH_BACKENDS and kernel.name not in planned.kernel_archs:
            continue  # left out by the plan (its cuda-minver is above this toolkit), as upstream
        archs = tuple(planned.kernel_archs.get(kernel.name, ()))
        dep_includes = tuple(depends.include_dirs(kernel.depends, log, on_line))
        for src in kernel.src:
            units.append((src, (*fw.include, *kernel.include, *dep_includes), kernel.cxx_flags, kernel.cuda_flags,
                          archs))

    compiles: list[Compile] = []
    seen: set[Path] = set()
    most_archs = 0
    for src, includes, cxx_extra, cuda_extra, archs in units:
        source = (root / src).resolve()
        if source in seen:
            continue
        seen.add(source)
        if not source.is_file():
            raise BuildFailed(f"{project.build_toml}: source `{src}` does not exist")
        suffix = source.suffix
        if suffix in _HEADERS:
            continue
        # as upstream: our headers, `csrc`, and the declared `include` folders (no project root)
        inc = [f"-I{gen}", f"-I{root / 'csrc'}", *(f"-I{(root / i).resolve()}" for i in includes)]
        obj = work_dir / "obj" / (_object_name(root, source) + ".o")
        # a project header naming the ops id may reach any unit: then every unit gets it
        names_ops = header_names_ops or flags.OPS_MACRO.encode() in source.read_bytes()
        ops_flag = [flags.ops_define(ops_id)] if names_ops else []
        if suffix in _CXX:
            args = [*flags.cxx_flags(debug), *base_defines, *ops_flag, *compat, *inc,
                    *_isystem(system_includes + cuda_includes), *cxx_extra]
            compiles.append(Compile(source, obj, "cxx", tuple(args)))
        elif suffix == ".c":
            args = ["-fPIC", "-O2", *base_defines, *ops_flag, *compat, *inc, *_isystem(system_includes)]
            compiles.append(Compile(source, obj, "cc", tuple(args)))
        elif suffix == ".cu" and backend == "cuda":
            if not toolchain.nvcc:
                raise BuildFailed(f"{src}: a CUDA source but the toolchain has no nvcc")
            if not archs:
                raise BuildFailed(f"{src}: no CUDA capabilities to compile for (check the plan)")
            gencode = flags.gencode_flags(archs)
            most_archs = max(most_archs, len(gencode))
            args = [*flags.nvcc_flags(toolchain, debug), *gencode,
                    *base_defines, *ops_flag, *compat, *inc, *_isystem(system_includes), *cuda_extra]
            compiles.append(Compile(source, obj, "nvcc", tuple(args)))
        else:
            raise BuildFailed(
                f"{project.build_toml}: cannot compile `{src}` for the {backend} backend "
                f"(publisher's local backend compiles C/C++{' and CUDA' if backend == 'cuda' else ''} sources)"
            )
    if not compiles:
        raise BuildFailed(f"{project.build_toml}: no compilable sources for the {backend} backend")
    # C11: no C23 redirect of glibc >= 2.38 applies to the file that defines their targets
    compiles.append(Compile(gen / "glibc_compat.c", work_dir / "obj" / "_glibc_compat.o", "cc",
                            ("-fPIC", "-O2", "-std=gnu11")))

    library = work_dir / f"{ops_id}.abi3.so"
    link = [f"-L{d}" for d in toolchain.library_dirs] + flags.torch_libraries(backend)
    link += flags.openmp_link_flags([a for c in compiles if c.rule == "cxx" for a in c.flags])
    if backend == "cuda":
        link.append(_cudart(toolchain))
    if not debug:
        link.append("-Wl,--strip-debug")
    # the variant's cores over its CUDA files: threads per nvcc, and how many nvcc run at once (within the
    # run's pool, which free memory caps). The thread count travels in the environment, not the command line,
    # so a run with other --cores recompiles nothing (ninja reruns a step whose command changed)
    cuda_files = sum(1 for c in compiles if c.rule == "nvcc")
    budget = max(1, min(cores, jobserver.slots))
    threads = flags.nvcc_threads(toolchain, most_archs, budget, cuda_files) if cuda_files else 1
    build = NinjaBuild(toolchain.cxx, toolchain.nvcc, tuple(compiles), library, tuple(link),
                       nvcc_at_once=max(1, budget // threads) if cuda_files else 0)
    write_if_changed(work_dir / "build.ninja", render(build))
    _remove_other_libraries(work_dir, library)

    env = dict(os.environ)
    env.pop("LD_RUN_PATH", None)  # ld would turn it into an RPATH
    if toolchain.cuda_home:
        env["CUDA_HOME"] = toolchain.cuda_home
    env.update(jobserver.env())
    appended = flags.nvcc_append_flags(env.get("NVCC_APPEND_FLAGS", ""), threads)
    if appended is not None:
        env["NVCC_APPEND_FLAGS"] = appended
        with log.open("a") as fh:
            fh.write(f"nvcc: {threads} threads per CUDA file (NVCC_APPEND_FLAGS), at most "
                     f"{build.nvcc_at_once} at once, {budget} cores\n")
    ninja_bin = os.path.join(ninja.BIN_DIR, "ninja")
    # no -j: ninja then takes its parallelism from the jobserver in MAKEFLAGS
    result = runner.run([ninja_bin, "-C", str(work_dir)], env=env, log=log, on_line=on_line)
    if not result.ok:
        raise BuildFailed(_first_error(result))
    return library


def _first_error(result: runner.RunResult) -> str:
    """The compiler's own first `error:` line beats ninja's `FAILED:` summary."""
    for line in result.output.splitlines():
        if "error:" in line:
            return line.strip()[:300]
    return result.first_error_line()


def _isystem(dirs) -> list[str]:
    out: list[str] = []
    for d in dirs:
        out += ["-isystem", str(d)]
    return out


def _object_name(root: Path, source: Path) -> str:
    try:
        rel = source.relative_to(root).as_posix()
    except ValueError:
        rel = "ext/" + hashlib.sha256(str(source).encode()).hexdigest()[:12] + "/" + source.name
    return rel.replace("/", "__")


def _cudart(toolchain: Toolchain) -> str:
    for d in toolchain.library_dirs:
        if (Path(d) / "libcudart.so").exists():
            return "-lcudart"
    for d in toolchain.library_dirs:
        found = sorted(Path(d).glob("libcudart.so.*"))
        if found:
            return f"-l:{found[0].name}"
    raise BuildFailed("libcudart not found in the toolchain (is the CUDA runtime installed?)")


def _remove_other_libraries(work_dir: Path, keep: Path) -> None:
    """A previous ops id's library must not linger (it is copied by name)."""
    for old in work_dir.glob("*.abi3.so"):
        if old != keep:
            old.unlink()
