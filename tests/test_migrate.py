"""`publisher migrate` on every legacy file of the corpus and on small cases:
the result passes `check`, a second run changes nothing, comments survive."""

from __future__ import annotations

import re
import shutil
import textwrap

import pytest
import tomllib

from publisher.project.load import load_project

from cli_helper import run_cli
from corpus_index import by_verdict, cases, require_corpus

LEGACY = [e for e in by_verdict("OK-auto-upgrade", "MIGRATE", "REJECT")
          if e.format.startswith(("v1", "v2", "v3", "v4")) and e.verdict != "REJECT"
          or e.verdict == "REJECT" and e.format.startswith(("v1", "v2", "v3"))]
PRE_V1 = [e for e in by_verdict("REJECT") if e.format.startswith("pre-v1")]


def migrate(*argv):
    result = run_cli("migrate", *argv)
    return result.returncode, result.stdout, result.stderr


def comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


@pytest.mark.parametrize("entry", cases(LEGACY), ids=[e.file[-60:] for e in LEGACY] or None)
def test_corpus_legacy_file_migrates(tmp_path, entry):
    require_corpus()
    path = tmp_path / "build.toml"
    shutil.copy(entry.toml, path)
    before = path.read_text()
    code, out, err = migrate(path, "--check")
    assert code == 1, out + err
    code, out, err = migrate(path, "--license", "apache-2.0", "--version", "1")
    after = path.read_text()
    data = tomllib.loads(after)
    assert data["general"]["edition"] == 5
    assert comments(before) == comments(after)
    # what was there keeps its value (legacy keys aside)
    old = tomllib.loads(before)["general"]
    for key in ("name", "version", "license", "upstream"):
        if key in old:
            assert data["general"][key] == old[key]
    _, findings = load_project(path)
    config_errors = {f.code for f in findings if f.is_error}
    assert "PB103" not in config_errors and "PB102" not in {f.code for f in findings}
    # migrate says whether check still finds errors it cannot fix
    assert code == (1 if config_errors else 0), out + err
    if entry.verdict != "REJECT":
        allowed = {"PB301", "PB207", "PB212"}  # the corpus' known later failures (test_corpus.py)
        assert config_errors <= allowed, [(f.code, f.message) for f in findings if f.is_error]
    assert migrate(path, "--check")[0] == 0
    assert migrate(path)[0] == 0 and path.read_text() == after


@pytest.mark.parametrize("entry", cases(PRE_V1), ids=[e.file[-60:] for e in PRE_V1] or None)
def test_pre_v1_files_are_refused_clearly(tmp_path, entry):
    require_corpus()
    path = tmp_path / "build.toml"
    shutil.copy(entry.toml, path)
    code, _, err = migrate(path, "--license", "mit", "--version", "1")
    assert code == 1 and "pre-v1" in err and "by hand" in err
    assert path.read_bytes() == entry.toml.read_bytes()


V3 = """\
# kernel for relu
[general]
name = "relu"  # the Hub name
backends = ["cuda", "rocm"]

# sources
[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]
"""


def test_missing_license_and_version_are_refused_unless_given(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text(V3)
    code, _, err = migrate(path)
    assert code == 1 and "--license" in err and "--version" in err and "Traceback" not in err
    assert path.read_text() == V3
    code, out, _ = migrate(path, "--license", "mit", "--version", "3")
    assert code == 0, out
    text = path.read_text()
    assert text.startswith("# kernel for relu\n[general]\nname = \"relu\"  # the Hub name\n")
    data = tomllib.loads(text)["general"]
    assert (data["license"], data["version"], data["edition"]) == ("mit", 3, 5)
    # key order of the untouched parts is kept
    assert text.index("[torch]") < text.index("[kernel.relu]")


def test_diff_prints_and_does_not_write(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text(V3)
    code, out, _ = migrate(tmp_path, "--diff", "--license", "mit", "--version", "1")
    assert code == 0 and path.read_text() == V3
    assert re.search(r"^\+edition = 5$", out, re.M) and out.startswith("---")


def test_v1_shapes(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text(textwrap.dedent("""\
        [general]
        name = "act"
        cuda-minver = "12.4"

        [torch]
        src = ["torch-ext/torch_binding.cpp"]

        [kernel.act]
        language = "cuda-hipify"
        cuda-capabilities = ["8.0"]
        rocm-archs = ["gfx942"]
        src = ["act/act.cu"]
        depends = ["torch"]

        [kernel.plain]
        src = ["plain/p.cu"]
        depends = ["torch"]
    """))
    assert migrate(path, "--license", "mit", "--version", "1")[0] == 0
    data = tomllib.loads(path.read_text())
    assert data["general"]["backends"] == ["cuda", "rocm"]
    assert data["general"]["cuda"] == {"minver": "12.4"}
    assert data["kernel"]["act"]["backend"] == "cuda" and "rocm-archs" not in data["kernel"]["act"]
    assert data["kernel"]["act_rocm"] == {"backend": "rocm", "depends": ["torch"], "src": ["act/act.cu"], "rocm-archs": ["gfx942"]}
    assert data["kernel"]["plain"]["backend"] == "cuda"


def test_universal_becomes_torch_noarch(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text('[general]\nname = "py-only"\nuniversal = true\n\n[torch]\npyext = ["py", "json"]\n')
    assert migrate(path, "--license", "mit", "--version", "1")[0] == 0
    data = tomllib.loads(path.read_text())
    assert "torch" not in data and data["torch-noarch"] == {"pyext": ["py", "json"]}
    assert "universal" not in data["general"] and "cuda" in data["general"]["backends"]
    _, findings = load_project(path)
    assert not [f for f in findings if f.is_error]


def test_edition_5_needs_nothing(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text('[general]\nname = "x1"\nversion = 1\nedition = 5\nlicense = "mit"\nbackends = ["cpu"]\n[torch-noarch]\n')
    code, out, _ = migrate(path, "--check")
    assert code == 0 and "nothing to do" in out


def test_invalid_toml_is_reported_not_raised(tmp_path):
    path = tmp_path / "build.toml"
    path.write_text("[general\n")
    code, _, err = migrate(path)
    assert code == 1 and "invalid TOML" in err and "Traceback" not in err


def test_what_migrate_cannot_fix_names_the_file_and_line(tmp_path):
    # ChipFlow's metal kernels (v3 files) carry a key of a kernel-builder fork: migrate upgrades the rest
    # and points at that key in the written file, as `check` would
    path = tmp_path / "build.toml"
    path.write_text(V3.replace('src = ["relu_cuda/relu.cu"]\n', 'src = ["relu_cuda/relu.cu"]\nmetal-std-version = "metal3.1"\n'))
    code, out, err = migrate(path, "--license", "mit", "--version", "1")
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("metal-std-version"))
    assert code == 1 and "<input>" not in out
    assert re.search(rf"^{re.escape(str(path))}\n\s+{line}\s+error\s+PB104\s+unknown key `metal-std-version`", out, re.M), out
    _, findings = load_project(path)
    assert [(f.code, f.file, f.line) for f in findings if f.is_error] == [("PB104", str(path), line)]
