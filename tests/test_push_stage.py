"""The push stage in process, without click: typed options in, events and a
PushResult out, refusals as PushRefused carrying their PP findings."""

from __future__ import annotations

import pytest

from publisher.errors import PushRefused
from publisher.options import PushOptions, Selection
from publisher.push.stage import run_push

from push_fixtures import repo_name


class Recorder:
    """PushEvents that keeps what the stage reported."""

    def __init__(self):
        self.notes: list[str] = []
        self.plans: list[tuple] = []
        self.commits: list[tuple] = []
        self.cards: list[str | None] = []

    def note(self, text):
        self.notes.append(text)

    def planned(self, repo_id, branch, plan, dry_run):
        self.plans.append((repo_id, branch, plan.branch_exists, dry_run))

    def committed(self, outcome, branch, verified_files):
        self.commits.append((outcome.commit, branch, verified_files))

    def card(self, commit):
        self.cards.append(commit)


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_an_untested_variant_is_refused_with_its_code_before_the_hub_changes(scale_project, hub_env):
    repo = repo_name()
    events = Recorder()
    with pytest.raises(PushRefused) as refused:
        run_push(PushOptions(path=scale_project, repo_id=repo, endpoint=hub_env.url), events)
    assert [(f.code, f.is_error) for f in refused.value.findings] == [("PP104", True)]
    assert "PP104 torch-cuda: no test record" in refused.value.message
    assert events.plans == [] and events.commits == []
    dry = run_push(PushOptions(path=scale_project, repo_id=repo, endpoint=hub_env.url, dry_run=True), Recorder())
    assert dry.report["plan"]["branch_exists"] is False  # the refused push created nothing


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_a_dry_run_returns_its_refusals_and_the_plan_instead_of_raising(scale_project, hub_env):
    repo = repo_name()
    events = Recorder()
    result = run_push(PushOptions(path=scale_project, repo_id=repo, endpoint=hub_env.url, dry_run=True), events)
    assert [f.code for f in result.refused] == ["PP104"]
    assert events.plans == [(repo, "v1", False, True)] and events.commits == []
    assert result.report["refused"][0].startswith("PP104 torch-cuda")
    assert [f["code"] for f in result.report["findings"]] == ["PP104"]


@pytest.mark.slow  # end-to-end: the session's built and tested project
def test_a_push_commits_verifies_and_updates_the_card(scale_project, hub_env):
    repo = repo_name()
    events = Recorder()
    options = PushOptions(path=scale_project, repo_id=repo, endpoint=hub_env.url, allow_untested=True)
    result = run_push(options, events)
    assert any(n.startswith("warning: PP104 torch-cuda") for n in events.notes)  # allowed, and said
    assert events.plans == [(repo, "v1", False, False)]
    ((commit, branch, verified),) = events.commits
    assert commit and branch == "v1" and verified > 0
    assert result.report["commit"] == commit and result.report["verified"] is True
    assert events.cards and events.cards[0] == result.report["card_commit"]
    again = Recorder()
    only_cpu = PushOptions(path=scale_project, repo_id=repo, endpoint=hub_env.url, selection=Selection(("torch-cpu",)))
    run_push(only_cpu, again)  # the same build again: nothing to commit
    assert again.commits == [(None, "v1", again.commits[0][2])]
