"""The push record (build/.publisher/push-report.json): what a build folder has published, which
decides whether a push sends its files before the Hub has listed the repo's branches. It names where
a build went, never a credential, and a record that does not fit the build as it is now counts as none."""

from __future__ import annotations

import json

from publisher import state
from publisher.push.early import place, published_from_here, record_published


def _variant(build, name, content="{}"):
    folder = build / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata.json").write_text(content)


def test_the_record_names_the_endpoint_without_credentials():
    where = place("https://someone:hf_secret_value@hub.example.org:8443/mirror/", "org/kernel", "v2")
    assert where == "https://hub.example.org:8443/mirror/ org/kernel@v2"
    assert "hf_secret_value" not in where and "someone" not in where


def test_a_published_build_is_known_until_it_changes(tmp_path):
    build = tmp_path / "build"
    _variant(build, "torch-cpu")
    _variant(build, "torch-cuda")
    here = place("https://huggingface.co", "org/kernel", "v1")
    assert not published_from_here(build, ["torch-cpu", "torch-cuda"], here)
    record_published(build, ["torch-cpu", "torch-cuda"], here)
    assert published_from_here(build, ["torch-cpu", "torch-cuda"], here)
    assert not published_from_here(build, ["torch-cpu"], place("https://huggingface.co", "org/kernel", "v2"))
    _variant(build, "torch-cuda", '{"rebuilt": true}')  # a rebuild: its metadata (and digest) changed
    assert published_from_here(build, ["torch-cpu"], here)
    assert not published_from_here(build, ["torch-cpu", "torch-cuda"], here)


def test_an_unreadable_or_foreign_record_counts_as_none(tmp_path):
    build = tmp_path / "build"
    _variant(build, "torch-cpu")
    here = place("https://huggingface.co", "org/kernel", "v1")
    path = state.push_report_path(build)
    path.parent.mkdir(parents=True)
    for junk in ("not json", json.dumps({"variants": {"torch-cpu": "x"}}), json.dumps([1, 2])):
        path.write_text(junk)
        assert not published_from_here(build, ["torch-cpu"], here)
    record_published(build, ["torch-cpu"], here)  # rewritten whole
    assert published_from_here(build, ["torch-cpu"], here)


def test_the_record_stays_small_for_a_build_pushed_to_many_repos(tmp_path):
    build = tmp_path / "build"
    _variant(build, "torch-cpu")
    for i in range(40):
        record_published(build, ["torch-cpu"], place("https://huggingface.co", f"org/k{i}", "v1"))
    entry = state.read_report(state.push_report_path(build))["variants"]["torch-cpu"]
    assert len(entry["published"]) == 16 and entry["published"][-1].endswith("org/k39@v1")
