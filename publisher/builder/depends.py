"""Header dependencies named in a kernel's `depends` (CUTLASS), fetched once per
version into the user cache and shared by every toolchain. Where they come
from is data (resources/depends_sources.yaml): a PyPI requirement, or the
GitHub release upstream's Nix build pins, checked against upstream's own hash
(the NAR hash of the unpacked tree, publisher/builder/nar.py) before use."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import ssl
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path, PurePosixPath

from publisher import env, runner
from publisher.builder.backend import LineSink
from publisher.builder.nar import nar_sha256
from publisher.data import data_path, load_yaml
from publisher.errors import BuildFailed, UsageError
from publisher.toolchains.provision import cache_root, locked, uv_path

SOURCES = data_path("depends_sources.yaml")
MAX_ARCHIVE = 2 << 30  # bytes: a release archive larger than this is not a header library
MAX_UNPACKED = 8 << 30  # bytes its files may add up to (a small archive can expand without bound)
TIMEOUT = 60  # seconds without a byte before a download is given up


@lru_cache(maxsize=1)
def _sources() -> dict:
    return load_yaml(SOURCES.read_text())


def include_dirs(depends: tuple[str, ...], log: Path, on_line: LineSink) -> list[str]:
    """Include folders for every non-torch dependency, fetching it on first use."""
    dirs: list[str] = []
    for name in depends:
        if name == "torch":
            continue
        source = _sources().get(name)
        if source is None:
            raise BuildFailed(f"dependency `{name}` is not available to the local backend (known: "
                              f"torch, {', '.join(sorted(_sources()))})")
        root = ensure(name, source, log, on_line)
        dirs += [str(root / d) for d in source["include"] if (root / d).is_dir()]
    return dirs


def ensure(name: str, source: dict, log: Path, on_line: LineSink) -> Path:
    """The dependency's folder in the cache, fetched (and checked) the first time. A folder there is
    always complete: it is filled aside and renamed into place."""
    key = hashlib.sha256(json.dumps(source, sort_keys=True).encode()).hexdigest()[:12]
    target = cache_root().parent / "depends" / f"{name}-{key}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target.with_suffix(".lock")):
        if target.is_dir():
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
        try:
            if "github" in source:
                _fetch_github(name, source, tmp, on_line)
            else:
                _fetch_pypi(name, source["requirement"], tmp, log, on_line)
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _fetch_pypi(name: str, requirement: str, dest: Path, log: Path, on_line: LineSink) -> None:
    on_line(f"fetching {requirement} for `depends = [\"{name}\"]`")
    uv = uv_path()
    installer = [uv, "pip", "install", "--python", sys.executable] if uv else [sys.executable, "-m", "pip", "install"]
    result = runner.run([*installer, "--no-deps", "--target", str(dest), requirement], log=log, on_line=on_line)
    if not result.ok:
        raise BuildFailed(f"could not fetch {requirement} for `{name}`: {result.first_error_line()}")


def archive_url(repo: str, tag: str) -> str:
    try:
        base = env.github_mirror()
    except UsageError as err:
        raise BuildFailed(f"{err.message} ({err.hint})") from None
    return f"{base}/{repo}/archive/refs/tags/{tag}.tar.gz"


def _fetch_github(name: str, source: dict, dest: Path, on_line: LineSink) -> None:
    url = archive_url(source["github"], source["tag"])
    on_line(f"fetching {source['github']} {source['tag']} for `depends = [\"{name}\"]` from {url}")
    archive = dest / ".archive.tar.gz"
    _download(url, archive, name)
    unpacked = dest / ".unpacked"
    root = _unpack(archive, unpacked, url, name)
    got = nar_sha256(root)
    if got != source["hash"]:
        raise BuildFailed(f"`{name}`: {url} is not the {source['github']} {source['tag']} that kernel-builder pins "
                          f"(its files hash to {got}, pinned {source['hash']}); nothing was kept")
    for child in root.iterdir():
        os.rename(child, dest / child.name)
    archive.unlink()
    shutil.rmtree(unpacked)


def _ssl_context() -> ssl.SSLContext:
    """The system's CA bundle, or the one pip and requests are told to use (proxies that re-sign TLS)."""
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        bundle = os.environ.get(var)
        if bundle and os.path.isfile(bundle):
            return ssl.create_default_context(cafile=bundle)
    return ssl.create_default_context()


def _download(url: str, path: Path, name: str) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "publisher (kernel-builder projects)"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=_ssl_context()) as answer, \
                open(path, "wb") as out:
            size = 0
            while chunk := answer.read(1 << 20):
                size += len(chunk)
                if size > MAX_ARCHIVE:
                    raise BuildFailed(f"`{name}`: {url} is larger than {MAX_ARCHIVE >> 30} GiB; not a header library")
                out.write(chunk)
    except urllib.error.HTTPError as err:
        raise BuildFailed(f"could not fetch `{name}`: {url} answered HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:  # cut, refused, bad URL
        reason = getattr(err, "reason", None) or repr(err)
        raise BuildFailed(f"could not fetch `{name}` from {url}: {reason} (no network? set PUBLISHER_GITHUB_MIRROR "
                          "to a mirror of github.com)") from None


def _unpack(archive: Path, dest: Path, url: str, name: str) -> Path:
    """The archive's single top folder, unpacked (as Nix's fetchFromGitHub strips it). Members that
    would land outside `dest`, absolute paths, links leaving it and device files are refused."""
    dest.mkdir()
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                _refuse_unsafe(member, url, name)
            if sum(m.size for m in members if m.isfile()) > MAX_UNPACKED:
                raise BuildFailed(f"`{name}`: {url} unpacks to more than {MAX_UNPACKED >> 30} GiB; not a header library")
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, members=members, filter="data")
            else:  # Python < 3.10.12: the checks above are the filter
                tar.extractall(dest, members=members)
    except (tarfile.TarError, EOFError, OSError, ValueError) as err:
        raise BuildFailed(f"`{name}`: {url} is not a readable .tar.gz ({err})") from None
    tops = list(dest.iterdir())
    if len(tops) != 1 or not tops[0].is_dir() or tops[0].is_symlink():
        raise BuildFailed(f"`{name}`: {url} does not hold one top folder, as GitHub's release archives do")
    return tops[0]


def _refuse_unsafe(member: tarfile.TarInfo, url: str, name: str) -> None:
    path = PurePosixPath(member.name)
    bad = (path.is_absolute() or ".." in path.parts or not (member.isfile() or member.isdir() or member.issym())
           or member.issym() and (PurePosixPath(member.linkname).is_absolute() or _escapes(path.parent, member.linkname)))
    if bad:
        raise BuildFailed(f"`{name}`: {url} holds an entry that would land outside its folder or is not a plain "
                          f"file, folder or link ({member.name!r}); refused")


def _escapes(folder: PurePosixPath, link: str) -> bool:
    depth = len(folder.parts)
    for part in PurePosixPath(link).parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 1:  # above the archive's top folder
            return True
    return False
