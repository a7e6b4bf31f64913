#!/usr/bin/env python3
"""The corpus of real build.toml files the tests read (PUBLISHER_CORPUS), rebuilt
from its public sources. The repository carries only our manifest (where each
file comes from, its sha256, and INDEX.md's verdict columns), never the
third-party files themselves.

  corpus.py manifest [--corpus DIR] [--git-dir OWNER/REPO=GITDIR ...]
      write tests/corpus/manifest.json from a local corpus (INDEX.md, build-toml/, layouts/)
  corpus.py fetch --dest DIR [--base-url URL] [--api-url URL]
      download every file at its commit, verify its sha256, write DIR as the tests read it

Stdlib only: CI runs it before any virtual environment exists."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "tests" / "corpus" / "manifest.json"
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
RAW_URL = "https://raw.githubusercontent.com"
API_URL = "https://api.github.com"
SCHEMA = 1
FULL_SHA = re.compile(r"[0-9a-f]{40}")
# What corpus_index.py reads from INDEX.md: a table row of 16 cells, the first a number.
INDEX_CELLS = 16
INDEX_PREAMBLE = ("# build.toml corpus — INDEX (rebuilt by scripts/corpus.py fetch from tests/corpus/manifest.json)\n"
                  "\nThe files under build-toml/ and layouts/ were downloaded at the commits below "
                  "and match their sha256.\n\n"
                  "## Files\n\n")
LAYOUTS_PREAMBLE = ("# Real kernel project layouts (paths only; rebuilt by scripts/corpus.py fetch)\n\n"
                    "Each `.txt` lists every file path of one project at its commit, one per line, sorted.\n\n")
TIMEOUT_S = 60


class CorpusError(Exception):
    """A problem the user fixes; printed without a traceback."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def _index_table(index: Path) -> tuple[list[str], list[list[str]]]:
    """INDEX.md's file table: its header and its rows (cells as written)."""
    header, rows = None, []
    for number, line in enumerate(index.read_text(encoding="utf-8").splitlines(), 1):
        cells = _cells(line)
        if len(cells) == INDEX_CELLS and cells[0] == "#":
            header = cells
        elif len(cells) >= INDEX_CELLS and cells[0].isdigit():
            if len(cells) != INDEX_CELLS:
                raise CorpusError(f"{index}:{number}: a file row has {len(cells)} cells, expected {INDEX_CELLS}")
            rows.append(cells)
    if header is None or not rows:
        raise CorpusError(f"{index}: no file table (a header row starting `| # |` and numbered rows)")
    return header, rows


def _layout_table(readme: Path) -> list[dict]:
    """layouts/README.md's table: file, source repo, project dir, commit."""
    rows = []
    for line in readme.read_text(encoding="utf-8").splitlines():
        cells = _cells(line)
        if len(cells) >= 4 and (m := re.fullmatch(r"\[([^\]]+\.txt)\]\(.*\)", cells[0])):
            rows.append({"file": m[1], "repo": cells[1], "dir": cells[2].strip("`"), "short": cells[3].strip("`")})
    return rows


class ShaResolver:
    """Full commit ids for INDEX.md's short ones: from the current manifest, else from local
    clones given as --git-dir (raw URLs are only documented for full ids)."""

    def __init__(self, previous: dict, git_dirs: dict[str, str]):
        self.known: dict[str, set[str]] = {}
        for item in previous.get("files", []) + previous.get("layouts", []):
            self.known.setdefault(item["repo"], set()).add(item["commit"])
        self.git_dirs = git_dirs

    def full(self, repo: str, short: str, where: str) -> str:
        matches = {c for c in self.known.get(repo, ()) if c.startswith(short)}
        if len(matches) == 1:
            return matches.pop()
        if repo in self.git_dirs:
            out = subprocess.run(["git", "--git-dir", self.git_dirs[repo], "rev-parse", "--verify", "--quiet",
                                  f"{short}^{{commit}}"], capture_output=True, text=True)
            if out.returncode == 0 and FULL_SHA.fullmatch(out.stdout.strip()):
                sha = out.stdout.strip()
                self.known.setdefault(repo, set()).add(sha)
                return sha
            raise CorpusError(f"{where}: commit {short} is not in {self.git_dirs[repo]} (--git-dir {repo}=...)")
        raise CorpusError(f"{where}: commit {short} of {repo} has no full id in {MANIFEST.name}; "
                          f"pass --git-dir {repo}=PATH/TO/CLONE/.git to resolve it")


def build_manifest(corpus: Path, previous: dict, git_dirs: dict[str, str]) -> dict:
    index = corpus / "INDEX.md"
    if not index.is_file():
        raise CorpusError(f"{index} is missing: --corpus must name a folder with INDEX.md, build-toml/ and layouts/")
    header, rows = _index_table(index)
    resolve = ShaResolver(previous, git_dirs)
    files = []
    for cells in rows:
        row = dict(zip(header, cells, strict=False))
        m = re.search(r"\[([^\]]+)\]", row["file"])
        if not m:
            raise CorpusError(f"{index}: row {row['#']}: column `file` has no [name](link)")
        path = corpus / "build-toml" / m[1]
        if not path.is_file():
            raise CorpusError(f"{index}: row {row['#']} lists {m[1]}, which is not in {corpus / 'build-toml'}")
        files.append({"file": m[1], "repo": row["repo"], "path": row["path"].strip("`"),
                      "commit": resolve.full(row["repo"], row[header[4]].strip("`"), f"{index}: row {row['#']}"),
                      "sha256": sha256(path.read_bytes()), "index": cells})
    layouts = []
    readme = corpus / "layouts" / "README.md"
    for row in _layout_table(readme) if readme.is_file() else []:
        path = corpus / "layouts" / row["file"]
        if not path.is_file():
            raise CorpusError(f"{readme} lists {row['file']}, which is not in {path.parent}")
        layouts.append({"file": row["file"], "repo": row["repo"], "dir": row["dir"],
                        "commit": resolve.full(row["repo"], row["short"], f"{readme}: {row['file']}"),
                        "sha256": sha256(path.read_bytes())})
    return {"schema": SCHEMA, "source": "INDEX.md, build-toml/ and layouts/ of the shared corpus",
            "index_header": header, "files": files, "layouts": layouts}


def dump(manifest: dict) -> str:
    return json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"


def load_manifest(path: Path) -> dict:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CorpusError(f"{path} is missing: run `scripts/corpus.py manifest` where the corpus is present") from None
    except json.JSONDecodeError as e:
        raise CorpusError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); "
                          "regenerate it with `scripts/corpus.py manifest`") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        found = manifest.get("schema") if isinstance(manifest, dict) else manifest
        raise CorpusError(f"{path}: field `schema` is {found!r}, this script reads {SCHEMA}")
    fields = {"files": ("file", "repo", "commit", "path", "sha256", "index"),
              "layouts": ("file", "repo", "commit", "dir", "sha256")}
    for section, keys in fields.items():
        for n, item in enumerate(manifest.get(section) or []):
            missing = [k for k in keys if not isinstance(item, dict) or not item.get(k)]
            if missing:
                raise CorpusError(f"{path}: {section}[{n}] lacks {', '.join(missing)}; "
                                  "regenerate it with `scripts/corpus.py manifest`")
            # Names become paths under --dest: nothing may climb out of it.
            if "/" in item["file"] or item["file"].startswith("."):
                raise CorpusError(f"{path}: {section}[{n}].file {item['file']!r} is not a plain file name")
    if not manifest.get("files") or not isinstance(manifest.get("index_header"), list):
        raise CorpusError(f"{path}: no `files` or `index_header`; regenerate it with `scripts/corpus.py manifest`")
    manifest.setdefault("layouts", [])
    return manifest


def _get(url: str) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "publisher-corpus-fetch"})
    token = os.environ.get("GITHUB_TOKEN")
    if token and url.startswith(API_URL + "/"):
        # Optional: the unauthenticated API allows 60 requests an hour per address.
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return response.read()


def _listing(tree: bytes, directory: str) -> bytes:
    """A layout file from a git tree listing: every file and submodule path under
    `directory`, relative to it, sorted, one a line."""
    doc = json.loads(tree)
    if doc.get("truncated"):
        raise ValueError("the tree listing is truncated")
    prefix = directory.rstrip("/") + "/"
    paths = sorted(e["path"][len(prefix):] for e in doc["tree"]
                   if e["type"] in ("blob", "commit") and e["path"].startswith(prefix))
    return "".join(p + "\n" for p in paths).encode()


def _write(path: Path, data: bytes) -> None:
    """Whole files only: a crash never leaves a half-written one for the next run to trust."""
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(data)
    os.chmod(tmp.name, 0o644)  # not the temporary file's private mode
    os.replace(tmp.name, path)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def fetch(manifest: dict, dest: Path, base_url: str, api_url: str) -> list[str]:
    """Each missing or stale file downloaded and verified; returns one error line per failing file."""
    try:
        (dest / "build-toml").mkdir(parents=True, exist_ok=True)
        (dest / "layouts").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CorpusError(f"--dest {dest}: cannot create its folders ({e.strerror})") from None
    errors, trees = [], {}
    jobs = [("build-toml", f, f"{base_url}/{f['repo']}/{f['commit']}/{f['path']}", None) for f in manifest["files"]]
    jobs += [("layouts", f, f"{api_url}/repos/{f['repo']}/git/trees/{f['commit']}?recursive=1", f["dir"])
             for f in manifest["layouts"]]
    fetched = 0
    for folder, item, url, directory in jobs:
        target = dest / folder / item["file"]
        if target.is_file() and sha256(target.read_bytes()) == item["sha256"]:
            continue  # a cached copy that is still right
        try:
            if directory is None:
                data = _get(url)
            else:
                if url not in trees:
                    trees[url] = _get(url)
                data = _listing(trees[url], directory)
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as e:
            reason = getattr(e, "reason", None) or e
            errors.append(f"{folder}/{item['file']}: cannot download {url}: {reason}")
            continue
        if (digest := sha256(data)) != item["sha256"]:
            errors.append(f"{folder}/{item['file']}: {url} has sha256 {digest}, the manifest expects {item['sha256']} "
                          "(the source changed, or the manifest is stale: "
                          "regenerate it with `scripts/corpus.py manifest`)")
            continue
        _write(target, data)
        fetched += 1
    if errors:
        # Without every file INDEX.md would promise more than the folder holds.
        (dest / "INDEX.md").unlink(missing_ok=True)
        return errors
    # Files an older manifest listed (a cache restored from it): the tests compare the folder with INDEX.md.
    for folder, items in (("build-toml", manifest["files"]), ("layouts", manifest["layouts"])):
        keep = {f["file"] for f in items} | {"README.md"}
        for stale in (dest / folder).iterdir():
            if stale.is_file() and stale.name not in keep:
                stale.unlink()
    # The tables `manifest` reads, so a fetched corpus regenerates the same manifest.
    _write(dest / "layouts" / "README.md", (LAYOUTS_PREAMBLE + _table(
        ["file", "source repo", "project dir", "commit"],
        [[f"[{f['file']}]({f['file']})", f["repo"], f"`{f['dir']}`", f"`{f['commit']}`"] for f in manifest["layouts"]]
    )).encode())
    _write(dest / "INDEX.md", (INDEX_PREAMBLE + _table(manifest["index_header"],
                                                       [f["index"] for f in manifest["files"]])).encode())
    print(f"corpus: {len(jobs)} files in {dest} ({fetched} downloaded, {len(jobs) - fetched} already there)")
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="corpus.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("manifest", help=f"write {MANIFEST.relative_to(REPO)} from a local corpus")
    m.add_argument("--corpus", type=Path, default=Path(os.environ.get("PUBLISHER_CORPUS") or DEFAULT_CORPUS))
    m.add_argument("--git-dir", action="append", default=[], metavar="OWNER/REPO=GITDIR",
                   help="a local clone to resolve short commit ids the manifest does not know yet")
    m.add_argument("--output", type=Path, default=MANIFEST)
    f = sub.add_parser("fetch", help="download the corpus the manifest describes into --dest")
    f.add_argument("--dest", type=Path, required=True)
    f.add_argument("--manifest", type=Path, default=MANIFEST)
    f.add_argument("--base-url", default=RAW_URL, help=f"where <repo>/<commit>/<path> is served (default {RAW_URL})")
    f.add_argument("--api-url", default=API_URL,
                   help=f"GitHub's REST API, for the layouts' tree listings (default {API_URL})")
    args = parser.parse_args(argv)
    try:
        if args.command == "manifest":
            git_dirs = {}
            for spec in args.git_dir:
                repo, sep, path = spec.partition("=")
                if not sep or not repo or not path:
                    raise CorpusError(f"--git-dir {spec!r}: expected OWNER/REPO=PATH")
                git_dirs[repo] = path
            previous = load_manifest(args.output) if args.output.is_file() else {}
            text = dump(build_manifest(args.corpus, previous, git_dirs))
            args.output.parent.mkdir(parents=True, exist_ok=True)
            _write(args.output, text.encode())
            print(f"corpus: wrote {args.output}")
            return 0
        errors = fetch(load_manifest(args.manifest), args.dest, args.base_url.rstrip("/"), args.api_url.rstrip("/"))
    except CorpusError as e:
        print(f"corpus: error: {e}", file=sys.stderr)
        return 2
    for line in errors:
        print(f"corpus: error: {line}", file=sys.stderr)
    if errors:
        print(f"corpus: {len(errors)} file(s) failed; {args.dest} is incomplete", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
