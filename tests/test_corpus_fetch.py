"""scripts/corpus.py: the corpus rebuilt from tests/corpus/manifest.json, served
here by a local HTTP server in GitHub's URL scheme (raw files at
<repo>/<commit>/<path>, tree listings at /repos/<repo>/git/trees/<commit>) from
the real corpus, since GitHub itself is not reachable from the test machine."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from route_server import RouteServer

from corpus_index import BUILD_TOMLS, CORPUS, LAYOUTS, require_corpus

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "corpus.py"
MANIFEST = REPO / "tests" / "corpus" / "manifest.json"

_spec = importlib.util.spec_from_file_location("corpus_script", SCRIPT)
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


def _manifest() -> dict:
    return json.loads(MANIFEST.read_text())


def _routes(manifest: dict) -> dict[str, bytes]:
    """GitHub's answers for every manifest entry, built from the real corpus."""
    routes = {}
    for f in manifest["files"]:
        routes[f"/{f['repo']}/{f['commit']}/{f['path']}"] = (BUILD_TOMLS / f["file"]).read_bytes()
    trees: dict[str, list[dict]] = {}
    for f in manifest["layouts"]:
        tree = trees.setdefault(f"/repos/{f['repo']}/git/trees/{f['commit']}?recursive=1", [])
        for rel in (LAYOUTS / f["file"]).read_text().splitlines():
            path = f"{f['dir']}/{rel}"
            tree.append({"path": path, "type": "blob", "mode": "100644"})
            # Folders are listed too and must not become lines of the layout.
            parts = path.split("/")
            tree += [{"path": "/".join(parts[:i]), "type": "tree", "mode": "040000"} for i in range(1, len(parts))]
    for url, tree in trees.items():
        routes[url] = json.dumps({"sha": "0" * 40, "tree": tree, "truncated": False}).encode()
    return routes


@pytest.fixture
def github():
    require_corpus()
    server = RouteServer(_routes(_manifest()))
    yield server
    server.close()


def _fetch(dest: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "fetch", "--dest", str(dest), "--base-url", url,
                           "--api-url", url, *extra], capture_output=True, text=True, timeout=300)


def test_manifest_is_in_sync_with_the_corpus():
    """Regenerating from the corpus present gives the committed manifest: every file listed, same bytes."""
    require_corpus()
    manifest = _manifest()
    assert corpus.build_manifest(CORPUS, manifest, {}) == manifest
    assert corpus.dump(manifest) == MANIFEST.read_text()
    assert {f["file"] for f in manifest["files"]} == {p.name for p in BUILD_TOMLS.glob("*.toml")}
    assert {f["file"] for f in manifest["layouts"]} == {p.name for p in LAYOUTS.glob("*.txt")}
    # Full commit ids: GitHub documents raw URLs and the trees API for those.
    assert all(re.fullmatch(r"[0-9a-f]{40}", f["commit"]) for f in manifest["files"] + manifest["layouts"])


@pytest.mark.slow  # a second pytest over the whole fetched corpus
def test_fetched_corpus_passes_the_corpus_tests(tmp_path, github):
    dest = tmp_path / "corpus"
    result = _fetch(dest, github.url)
    assert result.returncode == 0, result.stderr
    manifest = _manifest()
    for folder, items, source in (("build-toml", manifest["files"], BUILD_TOMLS),
                                  ("layouts", manifest["layouts"], LAYOUTS)):
        for f in items:
            assert (dest / folder / f["file"]).read_bytes() == (source / f["file"]).read_bytes(), f["file"]
    # Same table rows as the original INDEX.md, and the same manifest back from the fetched folder.
    assert corpus._index_table(dest / "INDEX.md") == corpus._index_table(CORPUS / "INDEX.md")
    assert corpus.build_manifest(dest, manifest, {}) == manifest
    # The corpus-driven tests themselves, reading the fetched folder.
    env = {**os.environ, "PUBLISHER_CORPUS": str(dest), "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_corpus.py",
                          "tests/test_check_layout.py", "-k", "corpus or real_layouts"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:]
    passed = int(re.search(r"(\d+) passed", run.stdout)[1])
    assert passed > len(manifest["files"]) and "corpus-missing" not in run.stdout


def test_second_fetch_downloads_nothing_it_already_has(tmp_path, github):
    """What a CI cache hit relies on: verified files are kept, only missing ones are downloaded."""
    dest = tmp_path / "corpus"
    assert _fetch(dest, github.url).returncode == 0
    first = len(github.requests)
    one = _manifest()["files"][0]
    (dest / "build-toml" / one["file"]).unlink()
    (dest / "build-toml" / "dropped-from-the-manifest.toml").write_text("[general]\n")
    result = _fetch(dest, github.url)
    assert result.returncode == 0, result.stderr
    assert github.requests[first:] == [f"/{one['repo']}/{one['commit']}/{one['path']}"]
    assert "1 downloaded" in result.stdout
    # A file an older manifest listed is gone: the folder holds what INDEX.md lists, no more.
    assert not (dest / "build-toml" / "dropped-from-the-manifest.toml").exists()


def test_changed_bytes_are_refused_naming_the_file(tmp_path, github):
    manifest = _manifest()
    changed = manifest["files"][3]
    url = f"/{changed['repo']}/{changed['commit']}/{changed['path']}"
    github.routes[url] = github.routes[url] + b"\n# changed\n"
    dest = tmp_path / "corpus"
    result = _fetch(dest, github.url)
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("corpus: error: ")]
    assert len(errors) == 1 and f"build-toml/{changed['file']}" in errors[0] and "sha256" in errors[0]
    assert "1 file(s) failed" in result.stderr and "Traceback" not in result.stderr
    assert not (dest / "build-toml" / changed["file"]).exists()
    # An incomplete folder never looks like a corpus to the tests.
    assert not (dest / "INDEX.md").exists()


def test_unreachable_source_names_each_file(tmp_path, github):
    manifest = _manifest()
    gone = manifest["layouts"][0]
    del github.routes[f"/repos/{gone['repo']}/git/trees/{gone['commit']}?recursive=1"]
    result = _fetch(tmp_path / "corpus", github.url)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    same_tree = [f for f in manifest["layouts"] if (f["repo"], f["commit"]) == (gone["repo"], gone["commit"])]
    for f in same_tree:
        assert f"corpus: error: layouts/{f['file']}: cannot download" in result.stderr
    assert f"{len(same_tree)} file(s) failed" in result.stderr


def test_broken_manifest_is_a_clear_error(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"schema": 1, "files": [')
    result = subprocess.run([sys.executable, str(SCRIPT), "fetch", "--dest", str(tmp_path / "d"), "--manifest",
                             str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{bad}:1: not valid JSON" in result.stderr and "scripts/corpus.py manifest" in result.stderr


def test_manifest_entry_without_a_field_is_a_clear_error(tmp_path):
    manifest = _manifest()
    del manifest["files"][2]["sha256"]
    bad = tmp_path / "manifest.json"
    bad.write_text(json.dumps(manifest))
    result = subprocess.run([sys.executable, str(SCRIPT), "fetch", "--dest", str(tmp_path / "d"), "--manifest",
                             str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "files[2] lacks sha256" in result.stderr
