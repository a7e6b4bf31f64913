"""What a variant's build depends on, hashed: the cache key that decides
whether a variant must be rebuilt."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from publisher import __version__
from publisher.builder.backend import BuildOptions
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project
from publisher.project.tree import not_source

# Beyond what is never a source (project/tree.py), what never feeds a build (tests and docs
# change freely; dot files are tool settings).
_SKIP_DIRS = {"tests", "benchmarks"}
_SKIP_SUFFIXES = {".md", ".lock"}
# publisher.toml picks which variants are built and where binaries may come from, not what one is made of
_SKIP_NAMES = {"flake.nix", "flake.lock", "publisher.toml"}


def project_files(project: Project) -> list[Path]:
    """Every file of the project a build could read, in a stable order
    (build folders, recognised by their .publisher records, are left out)."""
    assert project.root is not None
    root = project.root.resolve()
    files: list[Path] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir(), key=lambda p: p.name):
            if entry.is_dir():
                if entry.name.startswith(".") or entry.name in _SKIP_DIRS or not_source(entry):
                    continue
                stack.append(entry)
            elif entry.is_file():
                if (entry.suffix in _SKIP_SUFFIXES or entry.name in _SKIP_NAMES or entry.name.startswith(".")
                        or not_source(entry)):
                    continue
                files.append(entry)
    return sorted(files)


def source_digest(project: Project) -> str:
    assert project.root is not None
    root = project.root.resolve()
    h = hashlib.sha256()
    for path in project_files(project):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def ops_unique(planned: PlannedVariant, toolchain_identity: str, debug: bool, sources: str) -> str:
    """The unique part of the ops id (UPSTREAM.md section 2 allows a content
    hash): a hash of what the library is made from, not of the git revision,
    so a commit that changes no build input keeps the id and recompiles
    nothing, while builds from different inputs still load side by side."""
    blob = {
        "publisher": __version__,
        "variant": planned.name,
        "archs": {k: list(v) for k, v in sorted(planned.kernel_archs.items())},
        "toolchain": toolchain_identity,
        "debug": debug,
        "sources": sources,
    }
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:10]


def inputs_fingerprint(project: Project, planned: PlannedVariant, options: BuildOptions, backend_name: str,
                       sources: str) -> str:
    """What decides a variant's files, independent of the machine and of the
    git revision: recorded in metadata.json, it lets another checkout or a CI
    rerun recognise a variant already built (the Hub cache)."""
    toolchain = asdict(planned.toolchain)
    toolchain.pop("python", None)  # the path of this machine's interpreter (--local)
    blob = {
        "publisher": __version__,
        "backend": backend_name,
        "variant": planned.name,
        "archs": {k: list(v) for k, v in sorted(planned.kernel_archs.items())},
        "toolchain": toolchain,
        "debug": options.debug,
        "sources": sources,
    }
    return _sha256_json(blob)


def input_key(fingerprint: str, backend_identity: str, revision: str | None) -> str:
    """The local cache key: the portable fingerprint, plus this machine's
    toolchain identity and the git state, which the variant records
    (provenance): a new commit repackages the variant, and the unchanged ops id
    lets ninja find nothing to recompile."""
    return _sha256_json({"fingerprint": fingerprint, "backend-identity": backend_identity, "revision": revision})


def _sha256_json(blob: dict) -> str:
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()
