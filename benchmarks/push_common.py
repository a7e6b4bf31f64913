"""What the push benchmarks share: the Hub-compatible server (optionally slowed
to a network's pace), the environment both tools run in, and the two commands
compared — `publisher push` and the huggingface_hub upload a user would
otherwise write (create the repo and the version branch, `upload_folder`)."""

from __future__ import annotations

import compileall
import os
import shutil
import sys
from pathlib import Path

import publisher
from publisher.hub_server.server import HubServer, ServerConfig

TOKEN = "hf_" + "C" * 34

UPLOAD = """
import sys
from huggingface_hub import HfApi
api = HfApi()
repo, folder, branch = sys.argv[1], sys.argv[2], sys.argv[3]
api.create_repo(repo, repo_type="kernel", exist_ok=True)
api.create_branch(repo, branch=branch, repo_type="kernel", exist_ok=True)
api.upload_folder(repo_id=repo, folder_path=folder, path_in_repo="build", repo_type="kernel", revision=branch,
                  ignore_patterns=[".publisher/*", ".publisher/**"])
"""


def compile_publisher(tree: Path | None = None) -> None:
    """Byte-compile a publisher package (this one, or the one in `tree`) as `pip install` does, so a
    push never compiles its source while it is timed, as no installed publisher does.
    huggingface_hub is compiled at its install; without this, PYTHONDONTWRITEBYTECODE=1 in the
    shell (or an edited module) would charge publisher alone ~0.05 s per run."""
    package = tree / "publisher" if tree else Path(publisher.__file__).parent
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"{package}: byte-compiling failed")


def next_release(project: Path, dest: Path) -> Path:
    """A copy of `project` as its next release would be: every variant's binary files hold new bytes
    (of the same size), recorded in its metadata digest as a rebuild would."""
    from publisher.builder.metadata import METADATA, read_metadata, write_metadata

    copy = dest / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".publisher", "__pycache__"))
    for variant in sorted(p for p in (copy / "build").iterdir() if (p / METADATA).is_file()):
        for path in variant.rglob("*"):
            if path.is_file() and path.suffix not in (".py", ".json", ".sigstore"):
                path.write_bytes(os.urandom(path.stat().st_size))
        write_metadata(variant, {k: v for k, v in read_metadata(variant).items() if k != "digest"})
    return copy


def start_server(data: Path, latency_ms: float = 0.0) -> HubServer:
    """The server on 127.0.0.1; latency_ms is added to every answer (a Hub across a network)."""
    return HubServer(data, ServerConfig(tokens={TOKEN: "write"}, latency=latency_ms / 1000)).start()


def tool_env(server: HubServer, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
    env.update(HF_ENDPOINT=server.url, HF_HUB_DISABLE_XET="1", HF_TOKEN=TOKEN, HF_HOME=str(data / "home"))
    return env


def push_argv(repo: str, project: Path, branch: str = "v1") -> list[str]:
    return [sys.executable, "-m", "publisher", "push", repo, str(project), "--allow-untested", "--partial", "--no-card",
            "--branch", branch]


def upload_argv(repo: str, project: Path, branch: str = "v1") -> list[str]:
    return [sys.executable, "-c", UPLOAD, repo, str(project / "build"), branch]
