"""`publisher test` end to end: real builds, the real `kernels` client, real
pytest in a subprocess. A broken kernel must come back as a failed variant
with its output, never as a crash of publisher."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from publisher import state

from cli_helper import run_cli
from matrix_fixtures import GPU_RUNNER_MATRIX
from smoke_fixtures import CUDA_VARIANT, write_files

REPO = Path(__file__).resolve().parent.parent
CPU_VARIANT_GLOB = "torch*-cpu-*"

pytestmark = pytest.mark.slow


def run_test(project: Path, *args: str, op: str = "doubled", timeout: float = 600):
    env = dict(os.environ, BROKEN_OP=op)
    result = run_cli("test", str(project), "--json", *args, env=env, timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    return result, json.loads(result.stdout)


def only_entry(report: dict) -> tuple[str, dict]:
    (name, entry), = report["variants"].items()
    return name, entry


def test_wrong_result_fails_with_the_assertion(broken_project):
    result, report = run_test(broken_project, "--variant", CPU_VARIANT_GLOB, op="doubled")
    assert result.returncode == 1
    name, entry = only_entry(report)
    assert entry["status"] == "failed"
    assert entry["tests"] == {"passed": 0, "failed": 1, "skipped": 0, "errors": 0}
    assert "test_op_doubles" in entry["reason"]
    assert "Mismatched elements" in entry["output_tail"]
    assert entry["on_hardware"] is True
    # The record the push stage reads: beside the build, tied to this exact variant.
    recorded = state.read_report(state.test_report_path(broken_project / "build"))["variants"][name]
    assert recorded == entry
    assert entry["fingerprint"] == state.variant_fingerprint(broken_project / "build" / name)
    assert entry["device"]["torch"] and entry["device"]["python"] and entry["device"]["gpu"] is None


def test_segfault_is_a_failed_variant(broken_project):
    result, report = run_test(broken_project, "--variant", CPU_VARIANT_GLOB, op="crash")
    assert result.returncode == 1
    _, entry = only_entry(report)
    assert entry["status"] == "failed"
    assert "SIGSEGV" in entry["reason"] and "test_op_doubles" in entry["reason"]
    assert "Segmentation fault" in entry["output_tail"]
    assert entry["tests"]["failed"] == 1


def test_hang_is_stopped_by_the_per_test_timeout(broken_project):
    started = time.monotonic()
    result, report = run_test(broken_project, "--variant", CPU_VARIANT_GLOB, "--test-timeout", "5", op="hang")
    assert result.returncode == 1
    _, entry = only_entry(report)
    assert entry["status"] == "failed"
    assert "timed out" in entry["reason"] and "test_op_doubles" in entry["reason"]
    assert "Timeout" in entry["output_tail"]
    assert time.monotonic() - started < 120


def test_hang_is_stopped_by_the_variant_timeout(broken_project):
    result, report = run_test(broken_project, "--variant", CPU_VARIANT_GLOB, "--test-timeout", "600",
                              "--timeout", "15", op="hang")
    assert result.returncode == 1
    _, entry = only_entry(report)
    assert entry["status"] == "failed"
    assert entry["reason"].startswith("timed out after 15s") and "test_op_doubles" in entry["reason"]
    assert entry["seconds"] < 60


def test_table_shows_the_failure_and_its_output(broken_project):
    env = dict(os.environ, BROKEN_OP="doubled")
    result = run_cli("test", str(broken_project), "--variant", CPU_VARIANT_GLOB, env=env)
    assert result.returncode == 1
    assert "failed" in result.stdout and "1 failed" in result.stdout
    assert "AssertionError" in result.stdout  # the tail of the output, under the table
    assert "test-report.json" in result.stdout


def test_variant_changed_after_the_build_is_not_tested(broken_project, fresh_copy):
    project = fresh_copy(broken_project)
    variant = next((project / "build").glob(CPU_VARIANT_GLOB))
    (variant / "__init__.py").write_text((variant / "__init__.py").read_text() + "\n# edited\n")
    result, report = run_test(project, "--variant", CPU_VARIANT_GLOB)
    assert result.returncode == 1
    _, entry = only_entry(report)
    assert entry["status"] == "error"
    assert "__init__.py: changed after the build" in entry["reason"]


def test_python_only_kernel_passes_the_default_smoke_test(noarch_project):
    result = run_cli("test", str(noarch_project), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    _, entry = only_entry(json.loads(result.stdout))
    assert entry["status"] == "passed" and entry["on_hardware"] is True and entry["suite"] == "smoke"
    # loaded, its op registered, the op and halve(x: Tensor) called
    assert entry["tests"] == {"passed": 4, "failed": 0, "skipped": 0, "errors": 0}
    assert [c["outcome"] for c in entry["smoke"]] == ["exercised", "exercised"]


def test_softcap_example_passes(tmp_path):
    """The Python-only example: torch-cpu runs here; torch-cuda is loaded in a
    CUDA torch environment and reported as not run (no GPU here)."""
    out = tmp_path / "build"
    project = REPO / "kernel_projects" / "softcap"
    built = run_cli("build", str(project), "--local", "--out", str(out), "--json")
    assert built.returncode == 0, built.stdout + built.stderr
    result = run_cli("test", str(project), "--build-dir", str(out), "--variant", "torch-cpu", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    _, entry = only_entry(json.loads(result.stdout))
    assert entry["status"] == "passed" and entry["on_hardware"] is True
    assert entry["tests"]["passed"] > 0 and entry["tests"]["failed"] == 0


def test_rmsnorm_cpu_variant_passes(tmp_path):
    out = tmp_path / "build"
    project = REPO / "kernel_projects" / "rmsnorm"
    built = run_cli("build", str(project), "--local", "--variant", CPU_VARIANT_GLOB, "--out", str(out), "--json")
    assert built.returncode == 0, built.stdout + built.stderr
    result = run_cli("test", str(project), "--build-dir", str(out), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    _, entry = only_entry(json.loads(result.stdout))
    assert entry["status"] == "passed" and entry["on_hardware"] is True
    assert entry["tests"]["passed"] > 0 and entry["tests"]["failed"] == 0


def test_cuda_variant_without_gpu_is_loaded_not_run(broken_cuda_project):
    result, report = run_test(broken_cuda_project, "--matrix", str(GPU_RUNNER_MATRIX), "--variant", CUDA_VARIANT, "--allow-load-only", op="crash")
    assert result.returncode == 0, result.stderr
    _, entry = only_entry(report)
    assert entry["status"] == "loaded-not-run" and entry["on_hardware"] is False
    assert "no CUDA device here" in entry["reason"]
    # Imported and its ops found under the metadata id; nothing called (the op would segfault).
    assert entry["suite"] == "load-check" and entry["smoke"] == []
    assert entry["tests"] == {"passed": 2, "failed": 0, "skipped": 2, "errors": 0}
    assert entry["device"]["torch"].startswith("2.11") and entry["device"]["cuda"] == "13.0"


@pytest.mark.parametrize("flags", [(), ("--require-gpu",)], ids=["default", "require-gpu"])
def test_loaded_not_run_fails_the_run_unless_load_only_is_allowed(broken_cuda_project, flags):
    result, report = run_test(broken_cuda_project, "--matrix", str(GPU_RUNNER_MATRIX), "--variant", CUDA_VARIANT, *flags)
    assert result.returncode == 1
    _, entry = only_entry(report)
    assert entry["status"] == "loaded-not-run"
    assert report["ok"] is False


def test_only_the_variant_under_test_is_loaded(broken_project, fresh_copy, tmp_path):
    """build/ holds the broken CPU variant of the running torch and a correct Python-only
    `torch-cpu` build of the same kernel. `kernels` would prefer the first;
    testing the second must load the second."""
    project = fresh_copy(broken_project)
    fixed = tmp_path / "fixed"
    write_files(fixed, {
        "build.toml": '[general]\nname = "broken"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
                      'backends = ["cpu"]\n\n[torch-noarch]\n',
        "torch-ext/broken/__init__.py": "from ._ops import ops\n\n\ndef doubled(x):\n    return x * 2\n",
    })
    built = run_cli("build", str(fixed), "--local", "--out", str(project / "build"), "--json")
    assert built.returncode == 0, built.stdout + built.stderr
    result, report = run_test(project, "--variant", "torch-cpu", op="doubled")
    assert result.returncode == 0, report
    assert report["variants"]["torch-cpu"]["status"] == "passed"
    result, report = run_test(project, "--variant", CPU_VARIANT_GLOB, op="doubled")
    assert only_entry(report)[1]["status"] == "failed"


def test_every_variant_in_one_run(broken_cuda_project):
    """No selection: every built variant, each with its own environment."""
    result, report = run_test(broken_cuda_project, "--matrix", str(GPU_RUNNER_MATRIX), op="doubled")
    statuses = {name: e["status"] for name, e in report["variants"].items()}
    assert statuses[CUDA_VARIANT] == "loaded-not-run"
    cpu = next(n for n in statuses if n != CUDA_VARIANT)
    assert statuses[cpu] == "failed" and result.returncode == 1


@pytest.mark.parametrize("test_file, reason", [
    ("import pytest\n\n\ndef test_needs_gpu():\n    pytest.skip('needs a CUDA device')\n\n\n"
     "@pytest.mark.skip(reason='needs a CUDA device')\ndef test_other():\n    pass\n",
     "all 2 test(s) skipped (e.g. Skipped: needs a CUDA device)"),
    # flashrt-project/FlashRT-HF-kernels' tests are scripts (`python tests/x.py --artifact ...`): say so
    ("def helper():\n    return 1\n\n\nif __name__ == '__main__':\n    helper()\n",
     "no test ran: tests/ (1 Python file(s)) defines no pytest test"),
], ids=["all-skipped", "none-collected"])
def test_a_variant_that_ran_no_test_is_untested_not_passed(noarch_project, fresh_copy, test_file, reason):
    project = fresh_copy(noarch_project)
    write_files(project, {"tests/test_halve.py": test_file})
    result, report = run_test(project)
    assert result.returncode == 1, result.stdout + result.stderr
    _, entry = only_entry(report)
    assert entry["status"] == "untested" and entry["on_hardware"] is False
    assert entry["tests"]["passed"] == 0
    assert entry["reason"].startswith(reason)
    table = run_cli("test", str(project)).stdout
    assert "untested (no test ran)" in table


CONFTEST_FINDING_THE_SHELL_VARIANT = '''\
"""As a real project's conftest does (ErikKaum/maxsim): find the built variant where
kernel-builder's test shell puts it, PYTHONPATH=<the extension's Nix output, named
<name>-torch-ext>/<variant>; without it the tests would build the kernel from source."""
import os
from pathlib import Path

import torch

tag = "torch" + "".join(torch.__version__.split(".")[:2])
found = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
         if p and Path(p).name.startswith(("torch-", tag)) and "halve-torch-ext" in p and Path(p).is_dir()]
os.environ["HALVE_VARIANTS"] = os.pathsep.join(found)
'''

TEST_USING_THE_SHELL_VARIANT = '''\
import os
from pathlib import Path

import torch
from kernels import get_kernel


def test_the_shell_variant_is_the_build_under_test():
    FOUND = [Path(p) for p in os.environ["HALVE_VARIANTS"].split(os.pathsep) if p]
    assert len(FOUND) == 1, os.environ.get("PYTHONPATH")
    assert (FOUND[0] / "metadata.json").is_file()
    repo, _, where = os.environ["LOCAL_KERNELS"].partition("=")
    assert repo == "publisher-test/halve" and FOUND[0].parent == Path(where)
    k = get_kernel("publisher-test/halve", version=1)
    assert torch.equal(k.halve(torch.ones(2)), torch.full((2,), 0.5))
'''


def test_tests_find_the_variant_where_kernel_builders_test_shell_puts_it(noarch_project, fresh_copy):
    project = fresh_copy(noarch_project)
    text = (project / "build.toml").read_text().replace('backends = ["cpu"]\n',
                                                        'backends = ["cpu"]\n\n[general.hub]\nrepo-id = "publisher-test/halve"\n')
    (project / "build.toml").write_text(text)
    write_files(project, {"tests/conftest.py": CONFTEST_FINDING_THE_SHELL_VARIANT,
                          "tests/test_shell.py": TEST_USING_THE_SHELL_VARIANT})
    result, report = run_test(project)
    assert result.returncode == 0, result.stdout + result.stderr
    _, entry = only_entry(report)
    assert entry["status"] == "passed" and entry["tests"]["passed"] == 1, entry
