"""A kernel's `depends` (CUTLASS) fetched as the user's machine fetches it: the
release archive GitHub serves (here a stand-in on 127.0.0.1, through
PUBLISHER_GITHUB_MIRROR), kept only when its files carry the hash
kernel-builder pins. The real archives cannot be reached from here; the real
pins are data (resources/depends_sources.yaml)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest
from route_server import RouteServer

from publisher.builder import depends
from publisher.builder.nar import nar_sha256
from publisher.errors import BuildFailed

ARCHIVE_PATH = "/NVIDIA/cutlass/archive/refs/tags/v9.9.0.tar.gz"


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    server = RouteServer()
    monkeypatch.setenv("PUBLISHER_GITHUB_MIRROR", server.url)
    monkeypatch.setenv("PUBLISHER_CACHE_DIR", str(tmp_path / "cache"))
    yield server
    server.close()


def release_tree(root: Path) -> Path:
    """A header library as a GitHub release archive holds it, under one top folder."""
    (root / "include/cutlass").mkdir(parents=True)
    (root / "include/cutlass/cutlass.h").write_text("#pragma once\n#define CUTLASS_MAJOR 9\n")
    (root / "tools/util/include/cutlass/util").mkdir(parents=True)
    (root / "tools/util/include/cutlass/util/host_tensor.h").write_text("#pragma once\n")
    (root / "python").mkdir()
    (root / "python/setup.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "python/setup.sh", 0o755)
    os.symlink("include/cutlass/cutlass.h", root / "cutlass.h")
    return root


def tar_gz(members: list[tuple[str, Path | bytes | None]], links: dict[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, content in members:
            if isinstance(content, Path):
                tar.add(content, arcname=name)
            else:
                info = tarfile.TarInfo(name)
                info.size = len(content or b"")
                tar.addfile(info, io.BytesIO(content or b""))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return out.getvalue()


def source(pin: str) -> dict:
    return {"github": "NVIDIA/cutlass", "tag": "v9.9.0", "hash": pin, "include": ["include", "tools/util/include"]}


def fetch(spec: dict, tmp_path: Path) -> list[str]:
    lines: list[str] = []
    root = depends.ensure("cutlass_9_9", spec, tmp_path / "log", lines.append)
    return [str(root / d) for d in spec["include"] if (root / d).is_dir()]


def cached(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "depends"
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) if folder.is_dir() else []


def test_the_pinned_release_is_fetched_once_and_its_headers_used(mirror, tmp_path):
    tree = release_tree(tmp_path / "cutlass-9.9.0")
    mirror.routes[ARCHIVE_PATH] = tar_gz([("cutlass-9.9.0", tree)])
    includes = fetch(source(nar_sha256(tree)), tmp_path)
    assert len(includes) == 2 and includes[0].endswith("/include") and includes[1].endswith("/tools/util/include")
    assert (Path(includes[0]) / "cutlass/cutlass.h").read_text().endswith("CUTLASS_MAJOR 9\n")
    assert (Path(includes[1]) / "cutlass/util/host_tensor.h").is_file()
    assert os.access(Path(includes[0]).parent / "python/setup.sh", os.X_OK)  # unpacked as Nix hashes it
    assert fetch(source(nar_sha256(tree)), tmp_path) == includes
    assert mirror.requests == [ARCHIVE_PATH]  # the second build found it in the cache
    assert len(cached(tmp_path)) == 1


def test_an_archive_whose_files_differ_from_the_pin_is_not_kept(mirror, tmp_path):
    tree = release_tree(tmp_path / "cutlass-9.9.0")
    pin = nar_sha256(tree)
    (tree / "include/cutlass/cutlass.h").write_text("#pragma once\n#define CUTLASS_MAJOR 6\n")  # tampered
    mirror.routes[ARCHIVE_PATH] = tar_gz([("cutlass-9.9.0", tree)])
    with pytest.raises(BuildFailed) as err:
        fetch(source(pin), tmp_path)
    assert "is not the NVIDIA/cutlass v9.9.0 that kernel-builder pins" in err.value.first_error
    assert pin in err.value.first_error and mirror.url in err.value.first_error
    assert cached(tmp_path) == []  # nothing half-fetched left for the next build to trust


@pytest.mark.parametrize("members, links, why", [
    ([("cutlass-9.9.0/include/x.h", b"x"), ("../evil.h", b"x")], None, "land outside"),
    ([("/etc/evil.h", b"x")], None, "land outside"),
    ([("cutlass-9.9.0/include/x.h", b"x")], {"cutlass-9.9.0/include/up": "../../../etc"}, "land outside"),
    ([("cutlass-9.9.0/include/x.h", b"x"), ("other/y.h", b"y")], None, "one top folder"),
], ids=["dot-dot", "absolute", "link-out", "two-tops"])
def test_a_hostile_or_odd_archive_is_refused_before_anything_is_kept(mirror, tmp_path, members, links, why):
    mirror.routes[ARCHIVE_PATH] = tar_gz(members, links)
    with pytest.raises(BuildFailed) as err:
        fetch(source("sha256-" + "A" * 43 + "="), tmp_path)
    assert why in err.value.first_error
    assert cached(tmp_path) == [] and not (tmp_path / "evil.h").exists() and not (tmp_path / "cache/evil.h").exists()


def test_an_archive_that_unpacks_beyond_the_limit_is_refused(mirror, tmp_path, monkeypatch):
    monkeypatch.setattr(depends, "MAX_UNPACKED", 1000)
    mirror.routes[ARCHIVE_PATH] = tar_gz([("cutlass-9.9.0/include/x.h", b"\0" * 1001)])  # compresses to a few bytes
    with pytest.raises(BuildFailed) as err:
        fetch(source("sha256-" + "A" * 43 + "="), tmp_path)
    assert "unpacks to more than" in err.value.first_error and cached(tmp_path) == []


def test_an_unreachable_or_missing_release_names_the_url(mirror, tmp_path):
    with pytest.raises(BuildFailed) as err:
        fetch(source("sha256-" + "A" * 43 + "="), tmp_path)
    assert f"{mirror.url}{ARCHIVE_PATH} answered HTTP 404" in err.value.first_error
    mirror.routes[ARCHIVE_PATH] = b"this is not a tar.gz"
    with pytest.raises(BuildFailed) as err:
        fetch(source("sha256-" + "A" * 43 + "="), tmp_path)
    assert "is not a readable .tar.gz" in err.value.first_error
    assert cached(tmp_path) == []


def test_a_download_cut_short_is_a_build_failure_not_a_traceback(mirror, tmp_path, monkeypatch):
    import http.client

    class CutShort(io.BytesIO):
        def read(self, *args):
            raise http.client.IncompleteRead(b"partial", 100)

        def __enter__(self):
            return self

    monkeypatch.setattr(depends.urllib.request, "urlopen", lambda *a, **k: CutShort())
    with pytest.raises(BuildFailed) as err:
        fetch(source("sha256-" + "A" * 43 + "="), tmp_path)
    assert "could not fetch `cutlass_9_9`" in err.value.first_error and "IncompleteRead" in err.value.first_error
    assert cached(tmp_path) == []


@pytest.mark.parametrize("value", ["ftp://mirror", "not a url", "http://"])
def test_a_mirror_setting_that_cannot_work_is_named(monkeypatch, tmp_path, value):
    monkeypatch.setenv("PUBLISHER_GITHUB_MIRROR", value)
    monkeypatch.setenv("PUBLISHER_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(BuildFailed) as err:
        fetch(source("sha256-" + "A" * 43 + "="), tmp_path)
    assert err.value.first_error.startswith("PUBLISHER_GITHUB_MIRROR=")


def test_every_source_pins_what_it_fetches():
    # a GitHub source without a hash would be used unchecked; a PyPI one names one release series
    for name, spec in depends._sources().items():
        assert spec["include"], name
        if "github" in spec:
            assert spec["tag"].startswith("v") and spec["hash"].startswith("sha256-") and len(spec["hash"]) == 51, name
        else:
            assert "==" in spec["requirement"], name
