"""`check` (config only) over every real build.toml in the shared corpus,
against the verdict INDEX.md records for upstream's current parser."""

from __future__ import annotations

import re

import pytest

from publisher.project.load import load_project

from corpus_index import BUILD_TOMLS, by_verdict, cases, entries, require_corpus

# OK per upstream's *parser*, but `check` also knows what fails later (at CMake
# configure time, when writing metadata, or when the client loads the variant).
# These are the only errors allowed on such files, each for a stated reason.
KNOWN_LATER_FAILURES = {
    # upstream's own negative example: fails at CMake configure ("empty set of capabilities")
    "huggingface__kernels__examples__kernels__relu-invalid-capability__build.toml": {"PB302", "PB304"},
    # python-depends outside the curated list: the kernels client refuses to load the variant
    "huggingface__kernels-community__lite-attention__build__at-9434f7b.toml": {"PB207"},
    "huggingface__kernels-community__tokenspeed-attention__build__at-8264f09.toml": {"PB207"},
    "huggingface__kernels__examples__kernels__relu-tpu__build__at-31c394b.toml": {"PB207"},
    "huggingface__kernels__examples__kernels__relu-tpu__build__at-8734a42.toml": {"PB207"},
    # a kernel with an empty src list: upstream CMake stops ("SOURCES argument is required")
    "huggingface__kernels-community__tdt-loss__build__at-9c3bdd4.toml": {"PB212"},
}


# INDEX.md read the parser before kernels 0.17, which reads every version bound as exactly MAJOR.MINOR:
# upstream's parser refuses these files now (tests/test_upstream_parser.py runs it on every file)
REFUSED_SINCE_TWO_PART_VERSIONS = {
    "huggingface__kernels-community__flash-attn3__build__at-2c5394a.toml": ("general.cuda.maxver", '"13"', '"13.0"'),
}


def _ids(items):
    return [e.file.removesuffix(".toml")[-60:] for e in items]


def _errors(findings):
    return [f for f in findings if f.is_error]


def test_index_lists_every_corpus_file():
    require_corpus()
    listed = {e.file for e in entries()}
    on_disk = {p.name for p in BUILD_TOMLS.glob("*.toml")}
    assert listed == on_disk
    assert len(listed) > 100


ACCEPTED = [e for e in by_verdict("OK", "OK-auto-upgrade") if e.file not in REFUSED_SINCE_TWO_PART_VERSIONS]


@pytest.mark.parametrize("entry", cases(ACCEPTED), ids=_ids(ACCEPTED) or None)
def test_accepted_files_pass(entry):
    require_corpus()
    project, findings = load_project(entry.toml)
    codes = {f.code for f in _errors(findings)}
    expected = KNOWN_LATER_FAILURES.get(entry.file, set())
    assert codes == expected, [f"{f.code} {f.field}: {f.message}" for f in _errors(findings)]
    if not expected:
        assert project is not None
        assert project.config.general.name
    upgraded = any(f.code == "PB102" for f in findings)
    assert upgraded == (entry.verdict == "OK-auto-upgrade")


@pytest.mark.parametrize("file", sorted(REFUSED_SINCE_TWO_PART_VERSIONS))
def test_one_part_bounds_are_refused_at_their_line_with_the_repair(file):
    require_corpus()
    field, written, repair = REFUSED_SINCE_TWO_PART_VERSIONS[file]
    toml = next(e.toml for e in entries() if e.file == file)
    project, findings = load_project(toml)
    [bound] = [f for f in _errors(findings)]
    assert project is None and bound.code == "PB109" and bound.field == field
    assert written in toml.read_text().splitlines()[bound.line - 1]
    assert bound.hint.startswith(f"write {repair}")


@pytest.mark.parametrize("entry", cases(by_verdict("MIGRATE")), ids=_ids(by_verdict("MIGRATE")) or None)
def test_migrate_files_are_refused_with_a_migrate_hint(entry):
    require_corpus()
    project, findings = load_project(entry.toml)
    assert project is None
    legacy = [f for f in findings if f.code == "PB103"]
    assert legacy and all("publisher migrate" in f.hint for f in legacy)
    assert {f.code for f in _errors(findings)} == {"PB103"}, [f.message for f in _errors(findings)]


def _matches(clause: str, findings) -> bool | None:
    """Whether a finding gives the INDEX reason; None for reasons that depend
    on which edition the parser guessed (missing version/license, framework)."""
    if clause.startswith("TOML parse error"):
        return any(f.code == "PB100" for f in findings)
    if m := re.fullmatch(r"general\.name `([^`]*)` fails.*", clause):
        return any(f.code == "PB201" and f.field == "general.name" and m[1] in f.message for f in findings)
    if m := re.fullmatch(r"\S+: unknown backend `([^`]+)`", clause):
        return any(f.code == "PB204" and f"`{m[1]}`" in f.message for f in findings)
    if m := re.fullmatch(r"\S+: unknown dependency `([^`]+)`", clause):
        return any(f.code == "PB206" and f"`{m[1]}`" in f.message for f in findings)
    if m := re.fullmatch(r"(\S+): unknown field `([^`]+)`", clause):
        field = f"{m[1]}.{m[2]}"
        return any(f.code in ("PB103", "PB104") and f.field == field for f in findings)
    if m := re.fullmatch(r"(\S+)\.src missing", clause):
        return any(f.code == "PB105" and f.field == f"{m[1]}.src" for f in findings)
    return None


@pytest.mark.parametrize("entry", cases(by_verdict("REJECT")), ids=_ids(by_verdict("REJECT")) or None)
def test_rejected_files_are_refused_for_the_indexed_reason(entry):
    require_corpus()
    project, findings = load_project(entry.toml)
    assert project is None and _errors(findings)
    checked = 0
    for clause in entry.reject_clauses():
        verdict = _matches(clause, _errors(findings))
        if verdict is None:
            continue
        checked += 1
        assert verdict, f"no finding for INDEX reason {clause!r}: {[(f.code, f.field, f.message) for f in findings]}"
    legacy = entry.format.startswith(("v1", "v2", "v3", "pre-v1"))
    assert checked or legacy, f"no INDEX reason could be checked: {entry.reject_clauses()}"
    if legacy:
        assert any(f.code == "PB103" for f in findings)


def test_every_finding_is_located_and_has_a_hint():
    require_corpus()
    for entry in entries():
        _, findings = load_project(entry.toml)
        for f in findings:
            assert f.file == str(entry.toml)
            assert f.code and f.message
            if f.severity.value != "info":
                assert f.hint, f
            if f.field and f.code != "PB100":
                assert f.line is not None, (entry.file, f)
