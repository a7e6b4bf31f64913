"""metadata.json of a variant: writing it (with the digest over every file)
and checking a variant folder against it (UPSTREAM.md section 4)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from publisher.data import read_yaml
from publisher.project.model import BACKENDS

METADATA = "metadata.json"
# sigstore bundle over metadata.json, written after the build (so outside the digest, as `kernels` hashes)
SIGNATURE = "metadata.json.sigstore"
_REQUIRED = {"name": str, "id": str, "version": int, "license": str, "python-depends": list, "backend": dict}
# provenance key of the inputs fingerprint (publisher.builder.inputs); `kernels` ignores it
_INPUTS_KEY = "publisher-inputs"


def kernels_minver(fields: dict) -> str:
    """`kernels-minver` of a variant with these metadata fields: the highest version any feature it uses
    needs (resources/kernels_minver.yaml), the baseline when it uses none."""
    rule = read_yaml("kernels_minver.yaml")
    needed = [rule["baseline"], *(version for key, version in rule["features"].items() if fields.get(key))]
    return max(needed, key=lambda v: tuple(int(part) for part in v.split(".")))


def _digest_files(variant_dir: Path) -> list[Path]:
    """Every file except metadata.json, its signature and bytecode, as `kernels` hashes them."""
    files = []
    for path in sorted(variant_dir.rglob("*")):
        rel = path.relative_to(variant_dir)
        if not path.is_file() or rel.as_posix() in (METADATA, SIGNATURE):
            continue
        if "__pycache__" in rel.parts or path.suffix in (".pyc", ".pyo"):
            continue
        files.append(path)
    return files


def _sha256(path: Path) -> bytes:
    """In blocks: a variant's library can be hundreds of MiB, and several are hashed at once."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.digest()


def compute_digest(variant_dir: Path) -> dict:
    variant_dir = Path(variant_dir)
    files = {
        p.relative_to(variant_dir).as_posix(): base64.b64encode(_sha256(p)).decode()
        for p in _digest_files(variant_dir)
    }
    return {"algorithm": "sha256", "files": files}


def write_metadata(variant_dir: Path, fields: dict) -> dict:
    """Write metadata.json with `fields` plus the digest of the folder as it is now."""
    data = dict(fields)
    data["digest"] = compute_digest(variant_dir)
    (Path(variant_dir) / METADATA).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return data


def stamp_inputs(variant_dir: Path, fingerprint: str) -> None:
    """Record the build's inputs fingerprint under `provenance` (the digest
    leaves metadata.json out, so it stays valid). A metadata.json without
    provenance (another builder's, e.g. Nix) is left as it is: `kernels`
    rejects a provenance that lacks `kernel-builder`, and such a variant is
    simply never served from the Hub cache."""
    path = Path(variant_dir) / METADATA
    data = json.loads(path.read_text())
    provenance = data.get("provenance")
    if not isinstance(provenance, dict):
        return
    data["provenance"] = {**provenance, _INPUTS_KEY: fingerprint}
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def recorded_inputs(metadata: dict) -> str | None:
    """The inputs fingerprint a variant was built from, when publisher recorded one."""
    provenance = metadata.get("provenance")
    value = provenance.get(_INPUTS_KEY) if isinstance(provenance, dict) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class VariantCheck:
    metadata: dict | None
    problems: tuple[str, ...]  # empty = the folder is a valid variant
    sha256: dict[str, str] | None = None  # relpath -> hex hash of each file as just read (digest checked)

    @property
    def ok(self) -> bool:
        return not self.problems


def read_metadata(variant_dir: Path) -> dict:
    """Parse metadata.json; raises ValueError with a readable reason."""
    path = Path(variant_dir) / METADATA
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{path}: missing (every variant needs metadata.json since kernels 0.14)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must be a JSON object")
    for key, kind in _REQUIRED.items():
        if key not in data:
            raise ValueError(f"{path}: required field `{key}` is missing")
        if not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool)):
            raise ValueError(f"{path}: field `{key}` must be a {kind.__name__}")
    backend = data["backend"]
    if backend.get("type") not in BACKENDS:
        raise ValueError(f"{path}: backend.type must be one of {', '.join(BACKENDS)}")
    if not re.fullmatch(r"[a-z][-a-z0-9]*[a-z0-9]", data["name"]):
        raise ValueError(f"{path}: name `{data['name']}` is not a valid kernel name")
    from kernels._rust import Metadata  # the client's own reader: what it cannot read does not load

    try:
        Metadata.from_bytes(json.dumps(data).encode())
    except ValueError as err:
        raise ValueError(f"{path}: the kernels client cannot read it ({err})") from None
    return data


def check_variant(variant_dir: Path) -> VariantCheck:
    """Is this folder a complete, unmodified variant? (metadata parses, digest matches)"""
    variant_dir = Path(variant_dir)
    try:
        data = read_metadata(variant_dir)
    except ValueError as err:
        return VariantCheck(None, (str(err),))
    digest = data.get("digest")
    if not isinstance(digest, dict) or digest.get("algorithm") != "sha256" or not isinstance(digest.get("files"), dict):
        return VariantCheck(data, (f"{variant_dir / METADATA}: no sha256 digest; rebuild the variant",))
    actual = compute_digest(variant_dir)["files"]
    expected = digest["files"]
    problems = [f"{name}: missing (listed in the digest)" for name in sorted(expected.keys() - actual.keys())]
    problems += [f"{name}: not in the digest (added after the build)" for name in sorted(actual.keys() - expected.keys())]
    problems += [
        f"{name}: changed after the build (digest mismatch)"
        for name in sorted(expected.keys() & actual.keys())
        if expected[name] != actual[name]
    ]
    hashes = {name: base64.b64decode(value).hex() for name, value in actual.items()}
    return VariantCheck(data, tuple(problems), hashes)
