"""Every finding code publisher shows, in one catalogue. Codes are stable:
users search them and tests assert them; a code's severity here is its default
(a flag such as --partial or --allow-untested can lower an error to a warning).

PB: `check` (build.toml and layout). PB1xx the file and its shape (PB109-PB119:
what upstream's own parser refuses), PB2xx values, PB3xx GPU architectures,
PB4xx project layout, PB5xx platforms, PB6xx the sources the build compiles.
PP: `push` and `release`. PP1xx one variant (the gate), PP2xx the release as a whole,
PP3xx the public API against what the version branch holds, PP4xx the release as its consumers load it.
PA: `adopt` (a torch.utils.cpp_extension project ported to kernel-builder). PA10x finding the
extension, PA11x the pybind11 binding, PA12x the Python code, PA13x general values, PA14x flags,
PA15x paths, PA16x what would be written, PA17x op registrations (TORCH_LIBRARY, RegisterOperators), PA18x
ports of removed torch APIs and of lookups by the old name, PA19x the project's tests and the tests adopt writes.
"""

from __future__ import annotations

from publisher.findings import Finding, Severity

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

CODES: dict[str, tuple[Severity, str]] = {
    "PB100": (E, "build.toml cannot be read as TOML"),
    "PB101": (E, "unsupported build edition"),
    "PB102": (W, "legacy v4 build.toml (no edition), upgraded in memory"),
    "PB103": (E, "legacy build.toml (v3 or older) must be migrated"),
    "PB104": (E, "unknown key"),
    "PB105": (E, "required key missing"),
    "PB106": (E, "value has the wrong type"),
    "PB107": (E, "not exactly one framework table"),
    "PB108": (E, "not a kernel-builder build.toml (empty, or another tool's file)"),
    "PB109": (E, "version is not MAJOR.MINOR (upstream reads exactly two parts)"),
    "PB110": (E, "upstream's build.toml parser refuses the file"),
    "PB111": (I, "upstream's build.toml parser could not be run; publisher's own rules only"),
    "PB112": (W, "empty value upstream accepts (it names or builds nothing)"),
    "PB113": (W, "kernel name longer than a Hub repository name may be"),
    "PB201": (E, "invalid kernel name"),
    "PB202": (E, "invalid version"),
    "PB203": (W, "license is not a Hub license identifier"),
    "PB204": (E, "unknown backend"),
    "PB205": (W, "duplicate list entry"),
    "PB206": (E, "unknown build dependency"),
    "PB207": (E, "python dependency not in the curated list"),
    "PB208": (E, "invalid kernel dependency"),
    "PB209": (E, "invalid git URL"),
    "PB210": (W, "version bounds admit no version (minver above maxver)"),
    "PB211": (W, "kernel backend not in general.backends"),
    "PB212": (E, "kernel or binding without sources (the build stops)"),
    "PB213": (E, "invalid Hub repository id"),
    "PB214": (W, "build dependency unusual for the kernel backend"),
    "PB215": (W, "backend table without a matching backend"),
    "PB301": (W, "unknown CUDA capability (the build drops it)"),
    "PB302": (E, "no CUDA capability left for a toolkit"),
    "PB303": (W, "unknown ROCm architecture (the build drops it)"),
    "PB304": (E, "no ROCm architecture left for a toolkit"),
    "PB305": (I, "architectures per toolkit"),
    "PB306": (W, "capability built by no toolkit"),
    "PB307": (W, "CUDA kernel built by no toolkit"),
    "PB401": (E, "listed path does not exist"),
    "PB402": (E, "path leaves the project"),
    "PB403": (E, "Python package folder missing"),
    "PB404": (E, "no binding source for compiled kernels"),
    "PB405": (W, "generated file committed"),
    "PB406": (W, "no tests/ folder"),
    "PB407": (E, "compiled source uses pybind11 (refused by the limited Python API)"),
    "PB408": (E, "git submodule the build uses is not checked out"),
    "PB409": (W, "tests import a module nothing declares"),
    "PB410": (W, "pyproject.toml test dependencies cannot be read"),
    "PB501": (E, "publisher.toml invalid"),
    "PB502": (W, "architecture-specific compiler flag meets a platform it cannot compile for"),
    "PB601": (E, "source uses a torch C++ API no torch of the matrix has (removed)"),
    "PB602": (W, "source uses a torch C++ API some torch of the matrix lacks, or a deprecated one"),
    # adopt
    "PA101": (W, "extension left out (not a torch pybind11 extension, or no usable name or sources)"),
    "PA103": (I, "setup.py was run with recorders (reading it statically was not enough)"),
    "PA104": (W, "setup.py tried to run a program or open a connection; refused"),
    "PA105": (I, "setup.py answered as on a machine with a CUDA toolkit (none here)"),
    "PA106": (E, "setup.py could not be run with recorders (what it needed is named)"),
    "PA107": (W, "a project file has the name of a standard-library module (it shadows it where setup.py runs)"),
    "PA108": (I, "setup.py builds the CUDA extension without CUDA too: the kernel gets a cpu backend"),
    "PA111": (E, "binding construct or type no op schema can carry (needs hands)"),
    "PA112": (E, "bound function whose declaration adopt cannot read (missing, overloaded, template)"),
    "PA113": (W, "detail of the binding not carried (a default value, py::arg names, an m.def argument)"),
    "PA121": (E, "Python code adopt cannot rewrite (needs hands)"),
    "PA122": (W, "Python op registration under a fixed namespace"),
    "PA131": (W, "license not found"),
    "PA132": (I, "version not given"),
    "PA141": (W, "link argument or library not carried (build.toml has no link flags)"),
    "PA142": (I, "compile flag not carried (the build gives its own)"),
    "PA143": (I, "CUDA architectures chosen by setup.py at run time: the build's defaults used"),
    "PA144": (W, "CUDA architectures no toolkit of the matrix compiles: the build's defaults used"),
    "PA151": (W, "source or include folder outside the project, or missing"),
    "PA161": (E, "existing files would change (rerun with --force)"),
    "PA171": (E, "op registration adopt cannot port to the kernel's namespace (needs hands)"),
    "PA172": (W, "op registered without a schema adopt can read (torch infers it; not in the written tests)"),
    "PA173": (I, "op registrations under a fixed namespace ported to the kernel's own"),
    "PA174": (E, "two registrations define the same op name"),
    "PA175": (E, "build.toml would name a file that is neither in the project nor written by adopt"),
    "PA181": (I, "removed or deprecated torch C++ API ported to its exact replacement"),
    "PA182": (E, "removed torch C++ API with no exact replacement (needs hands)"),
    "PA183": (I, "Python lookup or loading of the extension by its old name replaced by an import of the carried module"),
    "PA191": (I, "the project's tests outside tests/ carried into tests/ (publisher test runs them)"),
    "PA192": (W, "no call in the project shows an op's inputs: the generated test's INPUTS are guessed"),
    "PA193": (W, "a file of the project's test folder not carried (not text)"),
    "PA194": (I, "what the tests import besides torch and kernels declared in publisher.toml test-depends"),
    # push (the gate, per variant)
    "PP101": (E, "no valid metadata.json"),
    "PP102": (E, "files changed after the build"),
    "PP103": (E, "ABI check failed"),
    "PP104": (E, "not tested on its hardware, or no test ran (a warning with --allow-untested/--allow-untested-variant)"),
    "PP105": (W, "built from a dirty tree"),
    "PP106": (E, "tests failed or crashed (never published)"),
    "PP130": (E, "signature bundle does not stand for metadata.json"),
    "PP140": (E, "backend.archs in metadata.json differ from the GPU code the library carries"),
    # push and release (the release as a whole)
    "PP201": (E, "required variants missing (a warning with --partial)"),
    "PP301": (E, "public API removed or changed on a published version (a warning with --allow-api-change)"),
    "PP302": (W, "the version branch holds no public API record to compare with"),
    # push: the release as its consumers load it
    "PP401": (E, "published, but consumers cannot load it as the card says"),
    "PP402": (E, "the card's kernels call cannot load the kernel for its owner (no trust_remote_code)"),
    "PP403": (W, "the consumer load could not be checked on this machine"),
}


def finding(code: str, message: str, *, severity: Severity | None = None, field: str | None = None,
            hint: str | None = None, file: str | None = None, line: int | None = None) -> Finding:
    """A finding with the catalogue's severity for `code`, unless a flag lowered it (`severity`)."""
    default, _ = CODES[code]
    return Finding(code=code, severity=severity or default, message=message, file=file, line=line, hint=hint,
                   field=field)
