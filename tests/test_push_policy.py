"""Release policy of `publisher push` and `publisher release`: coverage judged
against the matrix named with --matrix, and --allow-untested-variant, which
admits only matching variants whose import was checked ("loaded, not run")
because no runner has their hardware. Real builds, the real `publisher test`,
the in-process Hub-compatible server."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi

from cli_helper import run_cli
from matrix_fixtures import local_cpu_variant_name, write_local_matrix
from push_fixtures import repo_name

# end-to-end: a built and tested project published to the Hub server and loaded back (seconds a test)
pytestmark = pytest.mark.slow

LOAD_CHECKED = "built and load-checked, not run on hardware"


def _card(hub, repo: str) -> str:
    api = HfApi(endpoint=hub.url, token=hub.write_token)
    return open(api.hf_hub_download(repo, "README.md", repo_type="kernel"), encoding="utf-8").read()


def _row(card: str, variant: str) -> str:
    return next(line for line in card.splitlines() if line.startswith(f"| `{variant}` |"))


def _exists(hub, repo: str) -> bool:
    return HfApi(endpoint=hub.url, token=hub.write_token).repo_exists(repo, repo_type="kernel")


def test_push_judges_coverage_against_the_matrix_it_is_given(hub_env, broken_project, fresh_copy, tmp_path):
    # The running torch's compiled cpu variant; no test record (--allow-untested), coverage is the point here.
    local_matrix = write_local_matrix(tmp_path / "cpu-matrix.yaml", compute="cpu")
    project = fresh_copy(broken_project)
    (project / "build" / ".publisher" / "test-report.json").unlink(missing_ok=True)
    local = local_cpu_variant_name()
    refused = run_cli("push", repo_name(), str(project), "--allow-untested", env=hub_env.env())
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "PP201" in refused.stderr and "--partial" in refused.stderr  # the default matrix requires other cells

    repo = repo_name()
    pushed = run_cli("push", repo, str(project), "--allow-untested", "--matrix", str(local_matrix), env=hub_env.env())
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "PP201" not in pushed.stderr and "MISSING" not in pushed.stdout
    # The resolution table covers that matrix's one environment, served by the local variant.
    assert _table_targets(pushed.stdout) == [local]
    assert "## Missing variants" not in _card(hub_env, repo)


def _table_targets(stdout: str) -> list[str]:
    """The variant each environment of push's resolution table gets."""
    table = stdout[stdout.index("in each environment of the matrix"):]
    return [line.split("->")[1].split()[0] for line in table.splitlines() if "->" in line]


def test_push_refuses_a_matrix_file_that_does_not_exist_before_asking_the_hub(hub_env, scale_project, tmp_path):
    repo = repo_name()
    result = run_cli("push", repo, str(scale_project), "--matrix", str(tmp_path / "nope.yaml"), env=hub_env.env())
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nope.yaml: no such matrix file" in result.stderr and "Traceback" not in result.stderr
    assert not _exists(hub_env, repo)


def test_release_hands_its_matrix_to_the_push(hub_env, noarch_project, fresh_copy, tmp_path):
    # the CPU cell of the running torch: the torch-cpu variant's environment whatever torch runs the tests
    local_matrix = write_local_matrix(tmp_path / "cpu-matrix.yaml", compute="cpu")
    project = fresh_copy(noarch_project)
    base = ["release", str(project), "--local", "--endpoint", hub_env.url]
    default = run_cli(*base, "--repo", repo_name(), "--dry-run", env=hub_env.env())
    assert default.returncode == 0, default.stdout + default.stderr
    assert len(_table_targets(default.stdout)) > 1  # the default matrix: every environment of its cells

    repo = repo_name()
    named = run_cli(*base, "--repo", repo, "--matrix", str(local_matrix), env=hub_env.env())
    assert named.returncode == 0, named.stdout + named.stderr
    assert "== push" in named.stderr and _table_targets(named.stdout) == ["torch-cpu"]
    assert "build/torch-cpu/metadata.json" in HfApi(endpoint=hub_env.url).list_repo_files(
        repo, repo_type="kernel", revision="v1")


def test_allow_untested_variant_admits_only_load_checked_matches(hub_env, scale_project):
    # torch-cuda has no test record yet: a matching glob does not admit a variant nothing checked.
    repo = repo_name()
    refused = run_cli("push", repo, str(scale_project), "--allow-untested-variant", "torch-cu*", env=hub_env.env())
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "PP104 torch-cuda: no test record" in refused.stderr
    assert "admits torch-cuda only after `publisher test --allow-load-only`" in refused.stderr
    assert not _exists(hub_env, repo)

    checked = run_cli("test", "--variant", "torch-cuda", "--allow-load-only", str(scale_project), env=hub_env.env())
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "loaded, not run" in checked.stdout

    for args in ([], ["--allow-untested-variant", "torch-rocm*"]):  # no glob, or one that does not match
        still = run_cli("push", repo, str(scale_project), *args, env=hub_env.env())
        assert still.returncode == 1, still.stdout + still.stderr
        assert "PP104 torch-cuda: tests did not run on the variant's hardware" in still.stderr
        assert not _exists(hub_env, repo)

    pushed = run_cli("push", repo, str(scale_project), "--allow-untested-variant", "torch-cu*", env=hub_env.env())
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "warning: PP104 torch-cuda" in pushed.stderr and "--allow-untested-variant" in pushed.stderr
    card = _card(hub_env, repo)
    assert LOAD_CHECKED in _row(card, "torch-cuda")
    assert "passed" in _row(card, "torch-cpu") and LOAD_CHECKED not in _row(card, "torch-cpu")


def test_allow_untested_variant_never_admits_a_crashed_variant(hub_env, scale_project):
    (scale_project / "tests" / "test_scale.py").write_text(
        "import os\nimport signal\n\n\ndef test_crash():\n    os.kill(os.getpid(), signal.SIGSEGV)\n")
    tested = run_cli("test", "--variant", "torch-cpu", "--allow-load-only", str(scale_project), env=hub_env.env())
    assert tested.returncode == 1, tested.stdout + tested.stderr
    repo = repo_name()
    refused = run_cli("push", repo, str(scale_project), "--allow-untested-variant", "*", env=hub_env.env())
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "PP106 torch-cpu: tests failed" in refused.stderr
    assert not _exists(hub_env, repo)


def test_release_pushes_load_checked_variants_only_when_named(hub_env, scale_project):
    base = ["release", str(scale_project), "--allow-load-only", "--endpoint", hub_env.url]
    repo = repo_name()
    stopped = run_cli(*base, "--repo", repo, env=hub_env.env())
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "release stopped before the push: 1 variant(s) ran no test on their hardware" in stopped.stderr
    assert "torch-cuda: loaded-not-run" in stopped.stderr and not _exists(hub_env, repo)

    released = run_cli(*base, "--repo", repo, "--allow-untested-variant", "torch-cuda", env=hub_env.env())
    assert released.returncode == 0, released.stdout + released.stderr
    assert "== push" in released.stderr and "WARNING: --allow-untested" not in released.stderr
    assert LOAD_CHECKED in _row(_card(hub_env, repo), "torch-cuda")
