"""Values in an edition-5-shaped build.toml: names, versions, licenses,
backends, dependencies, URLs and version bounds. Only values of the right
TOML type are judged here (schema.py reports the others)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from publisher.codes import finding
from publisher.findings import Finding
from publisher.hub_names import repo_id_problem
from publisher.project import resources
from publisher.project.model import BACKENDS
from publisher.project.schema import suggest
from publisher.project.versions import parse_version, two_part_repair, version_problem

NAME = re.compile(r"[a-z][-a-z0-9]*[a-z0-9]")
GIT_SCHEMES = ("https", "http", "git", "ssh", "git+ssh", "git+https", "git+http")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?!\d)")
_SCP = re.compile(r"[^\s:/]+:(?!/)\S+")
_SPDX_SPLIT = re.compile(r"\s+(?:AND|OR|WITH)\s+|[()]")
BACKEND_TABLES = ("cuda", "neuron", "tpu", "xpu")
MAX_NAME = 96  # the Hub's limit on a repository name; the name also names folders and modules
MAX_INT = 2**63 - 1  # TOML integers are 64-bit; tomllib reads larger ones anyway

Line = Callable[[str, str | None], int | None]  # (field, list item) -> line


def _table(data: Mapping, key: str) -> Mapping:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def check_values(data: Mapping) -> list[Finding]:
    out: list[Finding] = []
    general = _table(data, "general")
    _name(general, out)
    _version(general, out)
    _license(general, out)
    backends = _backends(general, out)
    for key in ("upstream", "source"):
        if isinstance(general.get(key), str):
            _git_url(general[key], f"general.{key}", out)
    _python_depends(_strs(general.get("python-depends")), None, "general.python-depends", out)
    _kernel_depends(general.get("kernel-depends"), "general.kernel-depends", out)
    for backend in BACKEND_TABLES:
        table = general.get(backend)
        if not isinstance(table, Mapping):
            continue
        if backends is not None and backend not in backends:
            out.append(finding("PB215", f"[general.{backend}] is set but `{backend}` is not in general.backends",
                               field=f"general.{backend}", hint=f"add \"{backend}\" to general.backends or remove the table"))
        _python_depends(_strs(table.get("python-depends")), backend, f"general.{backend}.python-depends", out)
        _kernel_depends(table.get("kernel-depends"), f"general.{backend}.kernel-depends", out)
    cuda = _table(general, "cuda")
    _bounds(cuda, "general.cuda", out)
    _hub(_table(general, "hub"), out)
    _framework(data, out)
    _kernels(data, backends, out)
    return out


def _name(general: Mapping, out: list[Finding]) -> None:
    name = general.get("name")
    if isinstance(name, str) and len(name) > MAX_NAME and NAME.fullmatch(name):
        out.append(finding("PB113", f"general.name is {len(name)} characters long; the Hub takes at most {MAX_NAME}", field="general.name",
                           hint="shorten it: the name becomes folder, module and Hub repository names, which have length limits"))
    elif isinstance(name, str) and not NAME.fullmatch(name):
        fixed = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
        repaired = " (`publisher migrate` does; the Python package keeps its name)" if fixed == name.replace("_", "-") else ""
        out.append(finding("PB201", f"general.name `{name}` is not a valid kernel name: lowercase letters, digits and "
                           "dashes, starting with a letter, ending with a letter or digit, at least 2 characters",
                           field="general.name", hint=f"use e.g. `{fixed}`{repaired} (the Python package is the name with "
                           "dashes as underscores)" if NAME.fullmatch(fixed) else "rename it, e.g. `my-kernel`"))


def _version(general: Mapping, out: list[Finding]) -> None:
    version = general.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version < 0:
        out.append(finding("PB202", f"general.version {_digits(version)} must be 0 or more", field="general.version",
                           hint="the version is the Hub branch v<version>; use e.g. `version = 1`"))
    elif isinstance(version, int) and version > MAX_INT:
        out.append(finding("PB202", f"general.version {_digits(version)} is larger than a TOML integer (64-bit) can be",
                           field="general.version", hint="the version is the Hub branch v<version>; use e.g. `version = 1`"))


def _digits(number: int) -> str:
    """A huge integer, shortened for a message (Python refuses to print more than 4300 digits)."""
    text = str(number) if number.bit_length() < 10000 else "a number of more than 3000 digits"
    return text if len(text) <= 24 else f"{text[:10]}...({len(text)} digits)"


def _license(general: Mapping, out: list[Finding]) -> None:
    value = general.get("license")
    if not isinstance(value, str):
        return
    if not value.strip():
        out.append(finding("PB112", "general.license is empty", field="general.license", hint='set e.g. `license = "apache-2.0"`'))
        return
    problem = license_problem(value)
    if problem:
        out.append(finding("PB203", problem[0], field="general.license", hint=problem[1]))


def license_problem(value: str) -> tuple[str, str] | None:
    """(message, hint) when `value` (an SPDX expression) names a license the Hub does not know."""
    known = resources.hub_licenses()
    parts = [p.strip().lower() for p in _SPDX_SPLIT.split(value) if p.strip()]
    unknown = [p for p in parts if p not in known]
    if unknown:
        close = suggest(unknown[0], known)
        return (f"license `{value}` is not a license identifier the Hub knows ({', '.join(unknown)})",
                (f"did you mean `{close}`? " if close else "")
                + "the Hub card gets this value; use e.g. apache-2.0, mit, bsd-3-clause or `other`")
    return None


def _backends(general: Mapping, out: list[Finding]) -> list[str] | None:
    value = general.get("backends")
    if not isinstance(value, list):
        return None
    backends = _strs(value)
    if not value:
        out.append(finding("PB112", "general.backends is empty: nothing would be built", field="general.backends",
                           hint=f"list the backends the kernel supports: {', '.join(BACKENDS)}"))
    seen: set[str] = set()
    for backend in backends:
        if backend not in BACKENDS:
            close = suggest(backend, BACKENDS)
            out.append(finding("PB204", f"general.backends: unknown backend `{backend}`", field="general.backends",
                               hint=(f"did you mean `{close}`? " if close else "") + f"backends are {', '.join(BACKENDS)}"))
        elif backend in seen:
            out.append(finding("PB205", f"general.backends lists `{backend}` twice", field="general.backends", hint="remove the duplicate"))
        seen.add(backend)
    return backends


def _git_url(url: str, path: str, out: list[Finding]) -> None:
    scheme = _SCHEME.match(url)
    if scheme:
        if scheme[1].lower() in GIT_SCHEMES and len(url) > scheme.end() and not any(c.isspace() for c in url):
            return
        problem = f"unsupported scheme `{scheme[1]}`" if scheme[1].lower() not in GIT_SCHEMES else "malformed"
    elif _SCP.fullmatch(url):
        return
    else:
        problem = "not a URL"
    out.append(finding("PB209", f"{path} `{url}` is not a git URL ({problem})", field=path,
                       hint=f"use e.g. https://github.com/org/repo (schemes: {', '.join(GIT_SCHEMES)}) or git@host:org/repo.git"))


def _python_depends(names: list[str], backend: str | None, path: str, out: list[Finding]) -> None:
    allowed = resources.backend_python_depends(backend) if backend else resources.general_python_depends()
    for name in names:
        if name in allowed:
            continue
        elsewhere = [b for b in BACKENDS if name in resources.backend_python_depends(b)]
        if backend and name in resources.general_python_depends():
            hint = f"`{name}` is for every backend: list it in general.python-depends"
        elif elsewhere:
            hint = f"`{name}` is curated for {'/'.join(elsewhere)}: list it in [general.{elsewhere[0]}] python-depends"
        else:
            close = suggest(name, allowed)
            hint = (f"did you mean `{close}`? " if close else "") + (
                f"curated here: {', '.join(allowed) or 'none'}; the kernels client refuses any other name")
        where = f"the {backend} backend" if backend else "all backends"
        out.append(finding("PB207", f"{path}: `{name}` is not a curated Python dependency for {where}", field=path, hint=hint))


def _kernel_depends(value: object, path: str, out: list[Finding]) -> None:
    if not isinstance(value, list):
        return
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            continue
        where = f"{path}[{i}]"
        repo = item.get("repo-id")
        problem = repo_id_problem(repo) if isinstance(repo, str) else None
        if problem:
            out.append(finding("PB208", f"{where}: repo-id `{repo}` is not a kernel repo id ({problem})", field=path,
                               hint='write e.g. `{ repo-id = "kernels-community/einops", version = 1 }`'))
        has_version, has_revision = "version" in item, "revision" in item
        if has_version == has_revision:
            problem = "both `version` and `revision`" if has_version else "neither `version` nor `revision`"
            out.append(finding("PB208", f"{where}: has {problem}", field=path,
                               hint="give exactly one: `version = N` (Hub branch vN) or `revision = \"<sha or branch>\"`"))
        version = item.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and not 0 <= version <= MAX_INT:
            out.append(finding("PB208", f"{where}: version {_digits(version)} must be 0 or more and fit in 64 bits", field=path,
                               hint="use the dependency's Hub version, e.g. 1"))


def _bounds(table: Mapping, path: str, out: list[Finding]) -> None:
    for key in ("minver", "maxver"):
        _version_bound(table.get(key), f"{path}.{key}", out)
    low, high = parse_version(table.get("minver")), parse_version(table.get("maxver"))
    if low is not None and high is not None and low > high:
        out.append(finding("PB210", f"{path}: minver {table['minver']} is above maxver {table['maxver']}: no version is built",
                           field=f"{path}.minver", hint="swap them or fix the bound"))


def _version_bound(value: object, path: str, out: list[Finding]) -> None:
    """PB109 when upstream's parser refuses the bound (it reads exactly MAJOR.MINOR)."""
    problem = version_problem(value) if isinstance(value, str) else None
    if problem is None:
        return
    repair = two_part_repair(value)
    if repair is not None:
        hint = f'write "{repair}" (`publisher migrate` does)'
    elif problem.startswith("has "):
        hint = 'upstream compares MAJOR.MINOR only: write the release series, e.g. "12.8"'
    else:
        hint = 'write MAJOR.MINOR, e.g. "12.8"'
    out.append(finding("PB109", f'{path} "{value}" {problem}', field=path, hint=hint))


def _hub(hub: Mapping, out: list[Finding]) -> None:
    repo = hub.get("repo-id")
    problem = repo_id_problem(repo) if isinstance(repo, str) else None
    if problem:
        out.append(finding("PB213", f"general.hub.repo-id `{repo}` is not a kernel repo id ({problem})", field="general.hub.repo-id",
                           hint='write e.g. `repo-id = "my-org/my-kernel"`'))
    branch = hub.get("branch")
    if isinstance(branch, str) and not branch.strip():
        out.append(finding("PB112", "general.hub.branch is empty", field="general.hub.branch", hint="remove it or name a branch"))


def _framework(data: Mapping, out: list[Finding]) -> None:
    torch = _table(data, "torch")
    _bounds(torch, "torch", out)
    stable = torch.get("stable-abi")
    _version_bound(stable, "torch.stable-abi", out)
    if isinstance(stable, Mapping):
        for backend, version in stable.items():
            if backend not in BACKENDS:
                close = suggest(str(backend), BACKENDS)
                out.append(finding("PB204", f"torch.stable-abi: unknown backend `{backend}`", field=f"torch.stable-abi.{backend}",
                                   hint=f"did you mean `{close}`?" if close else f"backends are {', '.join(BACKENDS)}"))
            _version_bound(version, f"torch.stable-abi.{backend}", out)
    tvm = _table(data, "tvm-ffi")
    if isinstance(tvm.get("src"), list) and not tvm["src"]:
        out.append(finding("PB212", "tvm-ffi.src is empty", field="tvm-ffi.src", hint="list the tvm-ffi binding sources"))


def _kernels(data: Mapping, backends: list[str] | None, out: list[Finding]) -> None:
    depends = resources.build_depends()
    renamed = resources.renamed_build_depends()
    for name, kernel in _table(data, "kernel").items():
        if not isinstance(kernel, Mapping):
            continue
        path = f"kernel.{name}"
        backend = kernel.get("backend")
        if backends is not None and isinstance(backend, str) and backend in BACKENDS and backend not in backends:
            out.append(finding("PB211", f"kernel `{name}` is for {backend}, which general.backends does not list: it is never built",
                               field=f"{path}.backend", hint=f"add \"{backend}\" to general.backends or remove the kernel"))
        if isinstance(kernel.get("src"), list) and not kernel["src"]:
            out.append(finding("PB212", f"kernel `{name}` has an empty `src` list", field=f"{path}.src",
                               hint="list the kernel's source files (upstream CMake stops on a kernel without sources)"))
        for dep in _strs(kernel.get("depends")):
            if dep in renamed:
                out.append(finding("PB206", f"kernel `{name}`: dependency `{dep}` was renamed to `{renamed[dep]}`",
                                   field=f"{path}.depends", hint=f"replace `{dep}` with `{renamed[dep]}`"))
            elif dep not in depends:
                close = suggest(dep, depends)
                out.append(finding("PB206", f"kernel `{name}`: unknown dependency `{dep}`", field=f"{path}.depends",
                                   hint=(f"did you mean `{close}`? " if close else "") + f"known: {', '.join(depends)}"))
            elif isinstance(backend, str) and backend in BACKENDS and backend not in depends[dep]:
                out.append(finding("PB214", f"kernel `{name}` ({backend}) depends on `{dep}`, which is meant for {'/'.join(depends[dep])} kernels",
                                   field=f"{path}.depends", hint="check the dependency and the kernel backend"))
        _version_bound(kernel.get("cuda-minver"), f"{path}.cuda-minver", out)
