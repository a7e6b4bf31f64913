"""Hypothesis mutations of real corpus files (keys deleted, duplicated,
retyped; text truncated; bytes injected): `check` and `migrate` must answer
with exit 0 or 1 and never a traceback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import tomlkit
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helper import run_cli
from corpus_index import BUILD_TOMLS, require_corpus

FILES = sorted(BUILD_TOMLS.glob("*.toml")) if BUILD_TOMLS.is_dir() else []
PARSED = []
for _file in FILES:
    try:
        PARSED.append(tomllib.loads(_file.read_text()))
    except tomllib.TOMLDecodeError:
        pass


@pytest.fixture(autouse=True, scope="module")
def _corpus():
    require_corpus()


def fuzz(examples: int):
    return settings(max_examples=examples, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), database=None)

scalars = st.one_of(st.integers(-10, 10**6), st.text(max_size=12), st.booleans(),
                    st.floats(allow_nan=False, allow_infinity=False), st.just("9.0a+PTX"), st.just("cuda"))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=6)


def run(argv: list[str]) -> tuple[int, str]:
    result = run_cli(*argv)
    return result.returncode, result.output


def check_text(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "build.toml"
        path.write_bytes(data)
        code, output = run(["check", str(path), "--format", "json"])
        assert code in (0, 1), output
        if output.lstrip().startswith("{"):
            report = json.loads(output)
            assert report["ok"] == (code == 0)


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))


@st.composite
def mutated_documents(draw):
    doc = draw(st.sampled_from(PARSED))
    doc = json.loads(json.dumps(doc))  # a private deep copy
    for _ in range(draw(st.integers(1, 4))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["delete", "retype", "duplicate", "rename"]))
        if action == "delete":
            del parent[path[-1]]
        elif action == "retype":
            parent[path[-1]] = draw(values)
        elif action == "duplicate":
            target = draw(st.sampled_from([p for p in paths if isinstance(_get(doc, p), dict)] or [()]))
            _get(doc, target)[path[-1]] = json.loads(json.dumps(parent[path[-1]]))
        else:
            parent[draw(st.text(min_size=1, max_size=10))] = parent.pop(path[-1])
    return doc


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


@pytest.mark.slow  # a fuzzer: 1500 examples
@fuzz(1500)
@given(st.sampled_from(FILES), st.data())
def test_text_mutations(file, data):
    raw = file.read_bytes()
    action = data.draw(st.sampled_from(["truncate", "inject", "drop-line", "dup-line"]))
    if action == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    elif action == "inject":
        at = data.draw(st.integers(0, len(raw)))
        raw = raw[:at] + data.draw(st.binary(min_size=1, max_size=8)) + raw[at:]
    else:
        lines = raw.splitlines(keepends=True)
        i = data.draw(st.integers(0, max(0, len(lines) - 1)))
        lines[i:i + 1] = [] if action == "drop-line" else lines[i:i + 1] * 2
        raw = b"".join(lines)
    check_text(raw)


@pytest.mark.slow  # a fuzzer: 1000 examples
@fuzz(1000)
@given(mutated_documents())
def test_structure_mutations(doc):
    check_text(tomlkit.dumps(doc).encode())


@pytest.mark.slow  # a fuzzer: 250 examples, each a migrate
@fuzz(250)
@given(mutated_documents(), st.booleans())
def test_migrate_never_raises(doc, give_options):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "build.toml"
        path.write_text(tomlkit.dumps(doc))
        options = ["--license", "mit", "--version", "1"] if give_options else []
        code, output = run(["migrate", str(path), *options])
        assert code in (0, 1), output
        if code == 0 and "nothing to do" not in output:
            assert tomllib.loads(path.read_text())["general"]["edition"] == 5


@fuzz(300)
@given(st.lists(st.one_of(
    st.sampled_from(["#include <torch/extension.h>", "#  include <pybind11/stl.h>", "#if X", "#ifdef Y", "#endif",
                     "#else", "/*", "*/", "//", "PYBIND11_MODULE(m, x) {", '#include "', "#include <", "#"]),
    st.text(max_size=40)), max_size=30))
def test_the_pybind11_scan_reads_any_source(lines):
    # a compiled source's text, however odd (unbalanced comments and #if, half directives): found lines
    # are real lines of it, never a traceback
    from publisher.project.abi3 import refused_lines
    text = "\n".join(lines)
    found = refused_lines(text)
    assert all(1 <= line <= text.count("\n") + 1 for line, _ in found)
