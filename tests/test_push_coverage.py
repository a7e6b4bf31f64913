"""The release gate of `publisher push`: required variants of the declared
backends (coverage, PP201, --partial), test verdicts that mean something
(PP104/PP106), and exit code 4 when only the card failed after the kernel
was published. Against the Hub-compatible server, with real builds and tests."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi

from cli_helper import run_cli
from push_fixtures import repo_name

# end-to-end: a built and tested project published to the Hub server and loaded back (seconds a test)
pytestmark = pytest.mark.slow


def _push(hub, project, *args, env=None):
    return run_cli("push", repo_name(), str(project), *args, env=env or hub.env())


def _exists(hub, repo: str) -> bool:
    return HfApi(endpoint=hub.url, token=hub.write_token).repo_exists(repo, repo_type="kernel")


def test_missing_required_variant_refuses_the_push(hub_env, scale_project):
    repo = repo_name()
    refused = run_cli("push", repo, str(scale_project), "--variant", "torch-cpu", env=hub_env.env())
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "PP201" in refused.stderr and "lacks 1 of 2 required variant(s)" in refused.stderr
    assert "any platform: torch-cuda" in refused.stderr and "--partial" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not _exists(hub_env, repo)  # refused before anything was created


def test_partial_push_says_what_is_missing_on_the_card_and_in_the_table(hub_env, scale_project):
    repo = repo_name()
    pushed = run_cli("push", repo, str(scale_project), "--variant", "torch-cpu", "--partial", env=hub_env.env())
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "warning: PP201" in pushed.stderr
    table = pushed.stdout[pushed.stdout.index("in each environment of the matrix"):]
    assert "-> torch-cpu" in table and "MISSING: required" in table
    assert "missing required variants: any platform: torch-cuda" in table
    # Only the backends scale declares (cpu, cuda): no ROCm, XPU or Metal environments.
    assert not any(word in table for word in ("rocm", "xpu", "metal"))
    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    card = open(api.hf_hub_download(repo, "README.md", repo_type="kernel"), encoding="utf-8").read()
    assert "## Missing variants" in card and "- any platform: `torch-cuda`" in card


def test_complete_release_needs_no_partial(hub_env, scale_project):
    pushed = _push(hub_env, scale_project, "--allow-untested")
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "PP201" not in pushed.stderr and "MISSING" not in pushed.stdout
    assert "warning: PP104 torch-cuda: no test record" in pushed.stderr  # the code is shown


def test_allow_untested_never_publishes_a_failed_variant(hub_env, scale_project):
    (scale_project / "tests" / "test_scale.py").write_text("def test_fails():\n    assert 1 == 2\n")
    tested = run_cli("test", "--variant", "torch-cpu", str(scale_project), env=hub_env.env())
    assert tested.returncode == 1, tested.stdout + tested.stderr
    repo = repo_name()
    refused = run_cli("push", repo, str(scale_project), "--allow-untested", env=hub_env.env())
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "PP106 torch-cpu: tests failed" in refused.stderr
    assert not _exists(hub_env, repo)


def test_untested_variant_is_refused_unless_allowed(hub_env, scale_project):
    (scale_project / "tests" / "test_scale.py").write_text(
        "import pytest\n\n\ndef test_needs_gpu():\n    pytest.skip('needs CUDA')\n")
    tested = run_cli("test", "--variant", "torch-cpu", str(scale_project), env=hub_env.env())
    assert tested.returncode == 1 and "untested" in tested.stdout, tested.stdout + tested.stderr
    refused = _push(hub_env, scale_project)
    assert refused.returncode == 1
    assert "PP104 torch-cpu: no test ran (all 1 test(s) skipped" in refused.stderr
    allowed = _push(hub_env, scale_project, "--allow-untested")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "warning: PP104 torch-cpu: no test ran" in allowed.stderr


def test_card_failure_after_a_verified_publish_exits_4(hub_env, scale_project):
    repo = repo_name()
    env = {**hub_env.env(), "PUBLISHER_HUB_RETRIES": "1", "PUBLISHER_HUB_BACKOFF": "0.05"}
    rule = hub_env.fault("commit", action="status", status=500, after=1, times=5)  # the 2nd commit: the card
    result = run_cli("push", repo, str(scale_project), "--allow-untested", env=env)
    hub_env.state.faults.clear()
    assert rule.hits > 1
    assert result.returncode == 4, result.stdout + result.stderr
    assert "the kernel is published" in result.stderr and "card commit to main failed" in result.stderr
    assert "verified:" in result.stdout
    assert "v1" in {b.name for b in HfApi(endpoint=hub_env.url).list_repo_refs(repo, repo_type="kernel").branches}
    assert "4 the version branch was committed and verified" in run_cli("push", "--help", env=env).stdout
    rerun = run_cli("push", repo, str(scale_project), "--allow-untested", env=env)
    assert rerun.returncode == 0 and "card: README.md on main updated" in rerun.stdout, rerun.stderr


def test_a_variant_whose_generated_tests_need_inputs_is_refused_for_what_happened(hub_env, scale_project):
    # a generated test's op refused the inputs it was given (the skip reason adopt's tests give): tests ran,
    # none judged the kernel; the gate says that, and the fix, not "no test ran"
    (scale_project / "tests" / "test_scale.py").write_text(
        "import pytest\n\n\ndef test_registered():\n    pass\n\n\ndef test_scale_runs():\n"
        "    pytest.skip(\"needs inputs: scale refused guessed inputs (RuntimeError: factor must be a float tensor); "
        "give INPUTS['scale'] the shapes and dtypes it expects: tests/test_scale.py:9\")\n")
    tested = run_cli("test", "--variant", "torch-cpu", str(scale_project), env=hub_env.env())
    assert tested.returncode == 1, tested.stdout + tested.stderr
    assert "untested: 1 generated test(s) need inputs (see fix)" in tested.stdout
    refused = _push(hub_env, scale_project)
    assert refused.returncode == 1
    assert "PP104 torch-cpu: untested: 1 generated test(s) need inputs (see fix): 1 op(s)" in refused.stderr
    assert "no test ran" not in refused.stderr
    assert "edit INPUTS at tests/test_scale.py:9" in refused.stderr
