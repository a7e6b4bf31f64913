"""What consumers run, rendered in one place: the load call for each kind of
owner, the card's check of an author template's calls, where `kernels` loads a
CUDA variant by its archs, and `kernels-minver` in metadata.json."""

from __future__ import annotations

import json
import shutil

import pytest
from kernels._rust import Metadata, Version
from metadata_fixtures import built_metadata, unreadable

from publisher.consumer import LoadCall, Publisher, benchmark_commands
from publisher.push.card import unloadable_calls
from publisher.push.gpus import loads_on

from build_fixtures import write_noarch_project
from cli_helper import run_cli


@pytest.mark.parametrize("publisher", list(Publisher))
def test_the_load_call_allows_the_repo_unless_the_hub_trusts_its_owner(publisher):
    call = LoadCall("acme/relu", 2, publisher)
    if publisher is Publisher.TRUSTED:
        assert call.render() == 'get_kernel("acme/relu", version=2)' and call.why() is None
    else:
        assert call.render(prefix="kernels.") == \
            'kernels.get_kernel("acme/relu", version=2, trust_remote_code=["acme/relu"])'
        assert call.why().startswith("# ") and "allow" in call.why()
    assert call.render("install_kernel").startswith('install_kernel("acme/relu", version=2')


def test_a_user_account_and_an_untrusted_org_are_told_apart():
    assert "alice is a user account" in LoadCall("alice/k", 1, Publisher.USER).why()
    assert "acme is not a trusted kernel publisher" in LoadCall("acme/k", 1, Publisher.UNTRUSTED).why()


def test_card_calls_without_trust_are_found_only_where_the_owner_is_not_trusted():
    text = ('```python\nk = get_kernel("acme/relu", version=1)\n'
            'ok = get_kernel("acme/relu", version=1, trust_remote_code=["acme/relu"])\n'
            'other = get_kernel("someone/else", version=1)\n```\n')
    assert unloadable_calls(text, LoadCall("acme/relu", 1, Publisher.UNTRUSTED)) == \
        ['get_kernel("acme/relu", version=1)']
    assert unloadable_calls(text, LoadCall("acme/relu", 1, Publisher.TRUSTED)) == []


def test_benchmark_commands_use_a_snapshot_of_the_version_branch():
    lines = benchmark_commands("acme/relu", 3)
    assert lines[1] == "hf download acme/relu --repo-type kernel --revision v3 --local-dir relu-v3"
    assert lines[2] == "kernels benchmark ./relu-v3"
    assert not any(line.startswith("kernels benchmark acme/") for line in lines)


@pytest.mark.parametrize(("archs", "loads", "refused"), [
    (("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0+PTX"), "T4, A100, A10G", ""),
    (("9.0a",), "H100/H200", "T4, A100"),  # arch-specific: that capability only
    (("8.0",), "A100, A10G/A40/RTX 30xx, L4/L40S/RTX 40xx", "T4, H100/H200, B200, RTX 50xx"),  # same major only
    (("8.0+PTX",), "A100, A10G/A40/RTX 30xx, L4/L40S/RTX 40xx, H100/H200, B200, RTX 50xx", "T4"),  # PTX: newer too
    (("10.0f",), "B200", "RTX 50xx"),
])
def test_the_card_says_on_which_gpus_kernels_loads_a_cuda_variant(archs, loads, refused):
    text = loads_on("cuda", archs)
    assert text.startswith(loads)
    if refused:
        assert refused in text.split(" (not ", 1)[1]
    else:
        assert "(not" not in text


def test_a_cuda_variant_without_archs_loads_everywhere_and_cpu_on_any_cpu():
    assert "(not" not in loads_on("cuda", ()) and loads_on("cpu", ()) == "any CPU"


@pytest.mark.parametrize(("depends", "minver"), [("", "0.14.0"),
                                                  ('kernel-depends = [{ repo-id = "acme/relu", version = 1 }]\n',
                                                   "0.17.0")])
def test_metadata_carries_kernels_minver_as_upstream_computes_it(tmp_path, depends, minver):
    project = write_noarch_project(tmp_path / "tiny")
    toml = project / "build.toml"
    toml.write_text(toml.read_text().replace("edition = 5\n", "edition = 5\n" + depends))
    result = run_cli("build", str(project), "--local", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    for variant in ("torch-cpu", "torch-cuda"):
        path = project / "build" / variant / "metadata.json"
        assert json.loads(path.read_text())["kernels-minver"] == minver
        assert Metadata.read_from_file(path).kernels_minver == Version.from_str(minver)


def test_the_session_check_finds_publishers_builds_and_what_kernels_cannot_read(tmp_path):
    project = write_noarch_project(tmp_path / "tiny")
    assert run_cli("build", str(project), "--local").returncode == 0
    found = built_metadata(tmp_path)
    assert sorted(p.parent.name for p in found) == ["torch-cpu", "torch-cuda"] and unreadable(found) == []
    two_parts, none = found
    two_parts.write_text(json.dumps({**json.loads(two_parts.read_text()), "kernels-minver": "0.14"}))
    none.write_text(json.dumps({k: v for k, v in json.loads(none.read_text()).items() if k != "kernels-minver"}))
    problems = unreadable(found)
    shutil.rmtree(project / "build")  # broken on purpose: not for the session's own check of every build
    assert "Version has 2 components, expected 3" in problems[0] and problems[1].endswith(": no kernels-minver")
