"""One catalogue of finding codes: every code publisher can emit is in it, every
entry is emitted somewhere, and a refused push shows its PP codes in text and JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import publisher
from publisher.codes import CODES, finding
from publisher.findings import Severity

from cli_helper import run_cli
from push_fixtures import write_scale

SOURCE = Path(publisher.__file__).parent
CATALOGUE = SOURCE / "codes.py"
CODE = re.compile(r"\bP[A-Z]\d{3}\b")


def _codes_in_source() -> dict[str, set[str]]:
    """code -> the modules (outside the catalogue) that name it."""
    found: dict[str, set[str]] = {}
    for path in SOURCE.rglob("*.py"):
        if path != CATALOGUE:
            for code in CODE.findall(path.read_text(encoding="utf-8")):
                found.setdefault(code, set()).add(str(path.relative_to(SOURCE)))
    return found


def test_every_code_named_in_the_source_is_in_the_catalogue():
    unknown = {code: sorted(where) for code, where in _codes_in_source().items() if code not in CODES}
    assert unknown == {}


def test_every_catalogued_code_is_emitted_somewhere():
    assert sorted(set(CODES) - set(_codes_in_source())) == []


def test_catalogue_entries_have_a_family_a_severity_and_a_title():
    for code, (severity, title) in CODES.items():
        assert code[:2] in ("PB", "PP", "PA"), code
        assert isinstance(severity, Severity) and title.strip(), code


def test_a_finding_takes_the_catalogue_severity_unless_a_flag_lowers_it():
    assert finding("PP104", "torch-cuda: no test record").severity is Severity.ERROR
    assert finding("PP104", "torch-cuda: no test record", severity=Severity.WARNING).severity is Severity.WARNING
    assert finding("PB305", "archs").severity is Severity.INFO


def _refused_project(tmp_path: Path) -> Path:
    """A project whose only built variant has no metadata.json: the gate refuses it (PP101)."""
    root = tmp_path / "scale"
    write_scale(root)
    (root / "build" / "torch-cpu").mkdir(parents=True)
    (root / "build" / "torch-cpu" / "__init__.py").write_text("")
    return root


def test_a_refused_push_shows_its_pp_code_in_text(tmp_path, hub):
    root = _refused_project(tmp_path)
    refused = run_cli("push", "publisher-test/scale", str(root), env=hub.env())
    assert refused.returncode == 1, refused.stderr
    assert "push refused:" in refused.stderr
    assert "PP101 torch-cpu: no valid metadata.json" in refused.stderr
    assert "fix: rebuild it: publisher build --variant 'torch-cpu'" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_refused_push_shows_its_pp_findings_in_json(tmp_path, hub):
    root = _refused_project(tmp_path)
    refused = run_cli("push", "publisher-test/scale", str(root), "--json", env=hub.env())
    assert refused.returncode == 1, refused.stderr
    doc = json.loads(refused.stdout)
    assert doc["ok"] is False and doc["error"]["exit_code"] == 1
    (only,) = doc["findings"]
    assert (only["code"], only["severity"]) == ("PP101", "error")
    assert only["message"].startswith("torch-cpu: no valid metadata.json")
    assert only["file"].endswith("build/torch-cpu") and only["hint"].startswith("rebuild it")
