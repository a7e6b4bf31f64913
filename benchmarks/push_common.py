"""What the push benchmarks share: the Hub-compatible server (optionally slowed
to a network's pace), the environment both tools run in, and the two commands
compared — `publisher push` and the huggingface_hub upload a user would
otherwise write (create the repo and the version branch, `upload_folder`)."""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import publisher
from publisher.hub_server.server import HubServer, ServerConfig

TOKEN = "hf_" + "C" * 34

UPLOAD = """
import sys
from huggingface_hub import HfApi
api = HfApi()
repo, folder = sys.argv[1], sys.argv[2]
api.create_repo(repo, repo_type="kernel", exist_ok=True)
api.create_branch(repo, branch="v1", repo_type="kernel", exist_ok=True)
api.upload_folder(repo_id=repo, folder_path=folder, path_in_repo="build", repo_type="kernel", revision="v1",
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


def start_server(data: Path, latency_ms: float = 0.0) -> HubServer:
    """The server on 127.0.0.1; latency_ms is added to every answer (a Hub across a network)."""
    return HubServer(data, ServerConfig(tokens={TOKEN: "write"}, latency=latency_ms / 1000)).start()


def tool_env(server: HubServer, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
    env.update(HF_ENDPOINT=server.url, HF_HUB_DISABLE_XET="1", HF_TOKEN=TOKEN, HF_HOME=str(data / "home"))
    return env


def push_argv(repo: str, project: Path) -> list[str]:
    return [sys.executable, "-m", "publisher", "push", repo, str(project), "--allow-untested", "--partial", "--no-card"]


def upload_argv(repo: str, project: Path) -> list[str]:
    return [sys.executable, "-c", UPLOAD, repo, str(project / "build")]
