"""The documentation site builds without a warning, its references hold what the code holds, and
the getting-started commands a new user copies run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from publisher.cli import COMMANDS
from publisher.codes import CODES, FIXES

from adopt_fixtures import write_setup_project

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_the_findings_reference_lists_every_code_with_its_meaning_and_fix(site):
    assert set(FIXES) == set(CODES)  # a code without a fix in general, or a fix for no code
    page = (site / "reference" / "findings" / "index.html").read_text()
    missing = [code for code in CODES if f"<code>{code}</code>" not in page]
    assert not missing, missing
    assert "release workflow&rsquo;s sign step" in page or "release workflow's sign step" in page
    assert "upstream&rsquo;s build.toml parser refuses the file" in page or "upstream's build.toml parser refuses the file" in page


def test_the_cli_reference_documents_every_command_and_its_options(site):
    page = (site / "reference" / "cli" / "index.html").read_text()
    assert [name for name in COMMANDS if f"publisher {name}" not in page] == []
    assert "--allow-untested-variant" in page and "--jobs-executor" in page


def test_the_configuration_reference_holds_the_schema_and_the_shipped_matrix(site):
    page = (site / "reference" / "config" / "index.html").read_text()
    for key in ("kernel.NAME.cuda-capabilities", "general.hub.repo-id", "torch.stable-abi", "test-depends"):
        assert key in page, key
    first_comment = next(line for line in (ROOT / "publisher" / "resources" / "matrix.yaml").read_text().splitlines()
                         if line.startswith("# "))
    assert first_comment.removeprefix("# ") in page  # the shipped matrix.yaml, as shipped


def _runnable_blocks(page: Path) -> list[str]:
    text = page.read_text()
    return re.findall(r"<!-- docs-test: run -->\n```bash\n(.*?)\n```", text, re.S)


@pytest.mark.slow
def test_getting_started_commands_run_as_written(tmp_path):
    """The new-kernel block from nothing; the adopt block on a small setup.py CppExtension project (the
    existing-project block needs every cell's toolchain from PyTorch's indexes, which CI cannot reach)."""
    blocks = _runnable_blocks(ROOT / "docs" / "getting-started.md")
    assert len(blocks) == 2, "getting-started.md marks the new-kernel and the adopt blocks to run"
    write_setup_project(tmp_path / "my-extension")
    # the commands as a user types them (this environment's `publisher` first on PATH); the Hub stays offline
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    for block in blocks:
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if not command:
                continue
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=1800)
            assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
