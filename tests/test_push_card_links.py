"""A pushed card's relative links resolve on the Hub: the project files the
card links are committed to `main` with it; a link to nothing stops the push
before any commit."""

from __future__ import annotations

import re

import pytest
from huggingface_hub import HfApi

from publisher.push.card import linked_files

from cli_helper import run_cli
from push_fixtures import repo_name

CARD = """---
library_name: kernels
license: apache-2.0
---

# scale

![speed on CPU](benchmarks/speed.svg "speed")

The numbers: [results](./benchmarks/results.json), how to run them: [benchmark](benchmarks/benchmark.py#L1),
the guide: <a href="docs/guide.md">guide</a>, upstream: [kernels](https://github.com/huggingface/kernels),
[top](#scale).
"""


def _relative_links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)", text) + re.findall(r'href="([^"]+)"', text)
    return [link.split("#")[0] for link in links if not re.match(r"^(\w+:|#|/)", link)]


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_every_relative_link_of_the_pushed_card_resolves_on_main(hub_env, scale_project):
    (scale_project / "CARD.md").write_text(CARD)
    bench = scale_project / "benchmarks"
    bench.mkdir(exist_ok=True)
    (bench / "speed.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>\n")
    (bench / "results.json").write_text('{"results": [{"shape": "4", "ms": 1.0}]}\n')
    (bench / "benchmark.py").write_text("print('bench')\n")
    (scale_project / "docs").mkdir()
    (scale_project / "docs" / "guide.md").write_text("# guide\n")
    repo = repo_name()
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert pushed.returncode == 0, pushed.stderr

    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    readme = api.hf_hub_download(repo, "README.md", repo_type="kernel", revision="main",
                                 local_dir=str(scale_project.parent / "dl"))
    text = open(readme).read()
    links = _relative_links(text)
    assert sorted(set(links)) == ["./benchmarks/results.json", "benchmarks/benchmark.py", "benchmarks/speed.svg",
                                  "docs/guide.md"]
    on_main = set(api.list_repo_files(repo, repo_type="kernel", revision="main"))
    assert all(link.removeprefix("./") in on_main for link in links), on_main
    # what `kernels benchmark` runs is on the version branch as before
    assert "benchmarks/benchmark.py" in api.list_repo_files(repo, repo_type="kernel", revision="v1")


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_a_card_linking_a_missing_file_stops_the_push_before_any_commit(hub_env, scale_project):
    (scale_project / "CARD.md").write_text("# scale\n\n![plot](benchmarks/rmsnorm.png)\n")
    repo = repo_name()
    pushed = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert pushed.returncode != 0
    assert "CARD.md: the card links `benchmarks/rmsnorm.png`, which is not a file of the project" in pushed.stderr
    assert "Traceback" not in pushed.stderr
    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    if api.repo_exists(repo, repo_type="kernel"):  # nothing published: no version branch, no card
        refs = api.list_repo_refs(repo, repo_type="kernel")
        assert [b.name for b in refs.branches] == ["main"]
        assert "README.md" not in api.list_repo_files(repo, repo_type="kernel", revision="main")


def test_links_outside_the_project_are_refused(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "secret.txt").write_text("x")
    try:
        linked_files("[x](../secret.txt)", tmp_path / "p", "CARD.md")
    except Exception as err:
        assert "`../secret.txt`, which is not a file of the project" in str(err)
    else:
        raise AssertionError("a link out of the project was accepted")
