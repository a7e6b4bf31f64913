"""`publisher bench`: the project's benchmarks/benchmark*.py run against each
built variant this machine can run, as `kernels benchmark` runs them, with
what each benchmark did wrong reported for that benchmark (never a traceback
of publisher's), and the results filed per device."""

from __future__ import annotations

import json

import pytest

from publisher.bench.results import read_results

from bench_fixtures import write_benchmarks
from cli_helper import run_cli

# Every way a benchmark script can come out, in one run.
MIXED = {
    "benchmark.py": '''\
import torch

from kernels.benchmark import Benchmark


class TwiceBenchmark(Benchmark):
    seed = 0

    def setup(self):
        self.x = torch.randn(256, 256, device=self.device)

    def benchmark_matches(self):
        self.out = self.kernel.twice(self.x)

    def verify_matches(self):
        return self.x * 2

    def benchmark_unchecked(self):
        self.out = self.kernel.twice(self.x)

    def benchmark_wrong(self):
        self.out = self.kernel.thrice(self.x)

    def verify_wrong(self):
        return self.x * 2

    def setup_raises(self):
        self.x = torch.randn(3, 5)

    def benchmark_raises(self):
        self.out = self.kernel.refuse(self.x)

    def verify_raises(self):
        return self.x * 2

    def benchmark_no_output(self):
        self.kernel.twice(self.x)

    def verify_no_output(self):
        return self.x * 2


class Empty(Benchmark):
    pass
''',
    "benchmark_imports_missing.py": "import a_module_nobody_installed\n",
    "benchmark_plain.py": "print('a plain script, no Benchmark subclass')\n",
    "helpers.py": "raise RuntimeError('not a benchmark script: never imported')\n",
}


def _bench(project, *args, **kw):
    return run_cli("bench", str(project), "--iterations", "3", "--warmup", "1", *args, **kw)


def test_each_benchmark_gets_its_own_outcome_and_a_wrong_output_fails_the_run(twice_project):
    write_benchmarks(twice_project, MIXED)
    result = _bench(twice_project, "--variant", "torch-cpu", "--json")
    assert result.returncode == 1, result.output
    report = json.loads(result.stdout)
    entry = report["variants"]["torch-cpu"]
    assert entry["status"] == "failed" and "TwiceBenchmark.wrong" in entry["reason"], entry
    by_name = {w["workload"]: w for w in entry["workloads"]}
    assert sorted(by_name) == ["matches", "no_output", "raises", "unchecked", "wrong"]

    matches = by_name["matches"]
    assert matches["status"] == "verified" and matches["verify"]["max_abs_diff"] == 0.0
    assert matches["kernel"]["samples"] == 3 and matches["kernel"]["median_ms"] > 0
    assert matches["reference"]["samples"] == 3 and matches["speedup"] > 0
    assert matches["reference_source"] == "self.x * 2" and matches["script"] == "benchmarks/benchmark.py"
    unchecked = by_name["unchecked"]
    assert unchecked["status"] == "unverified" and unchecked["reference"] is None and unchecked["kernel"]["median_ms"] > 0

    wrong = by_name["wrong"]  # not timed as a success
    assert wrong["status"] == "failed" and wrong["kernel"] is None and wrong["verify"]["match"] is False
    assert "differs from the reference by up to" in wrong["verify"]["detail"]
    raises = by_name["raises"]
    assert raises["status"] == "error" and raises["error"]["message"] == "ValueError: refusing a tensor of shape (3, 5)"
    assert "benchmark.py" in raises["error"]["detail"] and "harness.py" not in raises["error"]["detail"]
    assert "self.out is NoneType after benchmark_no_output" in by_name["no_output"]["error"]["message"]

    problems = {(p["script"], p.get("benchmark")): p["message"] for p in entry["problems"]}
    assert problems == {
        ("benchmarks/benchmark.py", "Empty"): "has no benchmark_<workload> method",
        ("benchmarks/benchmark_imports_missing.py", None):
            "does not import: ModuleNotFoundError: No module named 'a_module_nobody_installed'",
        ("benchmarks/benchmark_plain.py", None):
            "defines no subclass of kernels.benchmark.Benchmark (`kernels benchmark` refuses such a script)",
    }
    # filed under this machine's CPU, fingerprinted
    (path,) = report["files"]
    filed = read_results(path)
    assert filed["device"]["kind"] == "cpu" and path.endswith(f"{filed['device']['key']}.json")
    assert filed["variants"]["torch-cpu"]["fingerprint"] == entry["fingerprint"]


def test_the_table_shows_the_benchmarks_own_traceback_not_publishers(twice_project):
    write_benchmarks(twice_project, MIXED)
    result = _bench(twice_project, "--variant", "torch-cpu")
    assert result.returncode == 1
    assert "TwiceBenchmark.matches" in result.stdout and "matches" in result.stdout
    assert "TwiceBenchmark.wrong: self.out differs from the reference by up to" in result.stdout
    assert "ValueError: refusing a tensor of shape (3, 5)" in result.stdout
    # the kernel's frame, where it raised, in the variant's build folder (not a scratch copy)
    assert f'{twice_project / "build" / "torch-cpu" / "__init__.py"}", line 20, in refuse' in result.stdout
    assert "Traceback" not in result.stderr and "harness.py" not in result.output


def test_a_process_that_dies_in_a_workload_keeps_what_ran_before_it(twice_project):
    write_benchmarks(twice_project, {"benchmark.py": '''\
import torch

from kernels.benchmark import Benchmark


class Dies(Benchmark):
    def setup(self):
        self.x = torch.ones(8)

    def benchmark_a_fine(self):
        self.out = self.kernel.twice(self.x)

    def verify_a_fine(self):
        return self.x * 2

    def benchmark_b_aborts(self):
        self.out = self.kernel.abort(self.x)

    def benchmark_c_never_reached(self):
        self.out = self.kernel.twice(self.x)
'''})
    result = _bench(twice_project, "--variant", "torch-cpu", "--json")
    assert result.returncode == 1, result.output
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "error" and entry["reason"].startswith("Dies.b_aborts: ended the process"), entry
    fine, aborted = entry["workloads"]
    assert fine["workload"] == "a_fine" and fine["status"] == "verified" and fine["kernel"]["median_ms"] > 0
    assert aborted["workload"] == "b_aborts" and aborted["status"] == "error"
    assert aborted["error"]["message"] == "ended the process (killed by signal 6)"
    # where it died: the stack faulthandler printed, the benchmark's and the kernel's frames, not the harness's
    detail = aborted["error"]["detail"]
    assert "in benchmark_b_aborts" in detail and f'{twice_project / "build" / "torch-cpu" / "__init__.py"}' in detail
    assert "harness" not in detail


@pytest.mark.slow  # waits for the timeout
def test_a_workload_that_never_returns_is_stopped_by_the_timeout(twice_project):
    write_benchmarks(twice_project, {"benchmark.py": '''\
import torch

from kernels.benchmark import Benchmark


class Sleeps(Benchmark):
    def setup(self):
        self.x = torch.ones(8)

    def benchmark_forever(self):
        self.out = self.kernel.sleep(self.x)
'''})
    result = _bench(twice_project, "--variant", "torch-cpu", "--timeout", "40", "--json")
    assert result.returncode == 1, result.output
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    (w,) = entry["workloads"]
    assert w["workload"] == "forever" and w["error"]["message"] == "did not finish within 40 s (--timeout)", entry


def test_a_variant_whose_accelerator_is_missing_is_skipped(twice_project, monkeypatch):
    write_benchmarks(twice_project, {"benchmark.py": MIXED["benchmark.py"]})
    monkeypatch.setattr("publisher.bench.stage.missing_accelerator",
                        lambda backend, platform: "needs a CUDA device; this machine shows none" if backend == "cuda" else None)
    result = _bench(twice_project, "--skip", "torch-cpu")
    assert result.returncode == 3
    assert "nothing to benchmark on this machine: torch-cuda needs a CUDA device; this machine shows none" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (twice_project / "build" / ".publisher" / "bench").exists()


@pytest.mark.parametrize("change, message, hint", [
    ("no-folder", "no benchmarks/ folder, so there is nothing to benchmark", "kernels.benchmark.Benchmark"),
    ("no-script", "benchmarks: no benchmark*.py script (`kernels benchmark` runs only those)", "benchmark_<workload>"),
    ("no-build", "build: no built variants", "publisher build"),
])
def test_nothing_to_run_is_a_clear_error(twice_project, change, message, hint):
    import shutil

    if change == "no-script":
        write_benchmarks(twice_project, {"helpers.py": "X = 1\n"})
    elif change == "no-build":
        write_benchmarks(twice_project, {"benchmark.py": MIXED["benchmark.py"]})
        shutil.rmtree(twice_project / "build")
    result = _bench(twice_project)
    assert result.returncode == 2, result.output
    assert message in result.stderr and hint in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--iterations", "0"], "--iterations: 0 gives no timing"),
    (["--warmup", "-1"], "--warmup: -1 is negative"),
    (["--variant", "torch999-*"], "no built variant matches torch999-*"),
])
def test_bad_options_are_usage_errors(twice_project, args, message):
    write_benchmarks(twice_project, {"benchmark.py": MIXED["benchmark.py"]})
    result = run_cli("bench", str(twice_project), *args, "--json")
    assert result.returncode == 2 and message in result.stderr
    assert json.loads(result.stdout)["error"]["message"].startswith(message.split(":")[0])


def test_a_variant_changed_after_its_build_is_not_benchmarked(twice_project):
    write_benchmarks(twice_project, {"benchmark.py": MIXED["benchmark.py"]})
    init = twice_project / "build" / "torch-cpu" / "__init__.py"
    init.write_text(init.read_text() + "\n# edited\n")
    result = _bench(twice_project, "--variant", "torch-cpu", "--json")
    assert result.returncode == 1
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "error" and "not a valid build" in entry["reason"] and "__init__.py" in entry["reason"]
    assert entry["fix"] == f"rebuild it: publisher build {twice_project} --variant torch-cpu"


def test_whether_this_machine_has_a_variants_accelerator_is_read_from_the_system(monkeypatch, tmp_path):
    from publisher.testing import accelerators

    files: set[str] = set()
    programs: set[str] = set()
    monkeypatch.setattr(accelerators.glob, "glob", lambda pattern: [pattern] if pattern in files else [])
    monkeypatch.setattr(accelerators.shutil, "which", lambda name: f"/usr/bin/{name}" if name in programs else None)
    missing = accelerators.missing_accelerator
    assert missing("cuda", "x86_64-linux") == "needs a CUDA device; this machine shows none"
    files.add("/dev/nvidiactl")
    assert missing("cuda", "x86_64-linux") is None
    programs.add("nvidia-smi")  # Windows: no /dev, the driver's program
    assert missing("cuda", "x86_64-windows") is None
    assert missing("rocm", "x86_64-linux") == "needs a ROCm device; this machine shows none"
    assert missing("rocm", "aarch64-darwin") == "needs ROCm, which aarch64-darwin does not have"
    assert missing("metal", "aarch64-darwin") is None  # every Apple silicon Mac has one
    assert missing("cpu", "x86_64-linux") is None and missing("universal", "x86_64-linux") is None


@pytest.mark.slow  # end-to-end: builds the example kernel (C++), benchmarks it, renders its card
def test_the_example_kernel_is_benchmarked_against_f_rms_norm_and_its_card_shows_it(hub_env, tmp_path):
    import shutil
    from pathlib import Path

    from matrix_fixtures import write_local_matrix

    root = tmp_path / "rmsnorm"
    example = Path(__file__).resolve().parent.parent / "kernel_projects" / "rmsnorm"
    shutil.copytree(example, root, ignore=shutil.ignore_patterns("build", "__pycache__"))
    matrix = write_local_matrix(tmp_path / "matrix.yaml", "cpu")  # the running torch's CPU cell, on any machine
    built = run_cli("build", str(root), "--local", "--matrix", str(matrix), "--no-hub-cache", "--json", timeout=1200)
    assert built.returncode == 0, built.output
    result = _bench(root, "--matrix", str(matrix), "--json")
    assert result.returncode == 0, result.output
    report = json.loads(result.stdout)
    ((name, entry),) = report["variants"].items()
    assert entry["status"] == "ok" and entry["device"]["kind"] == "cpu", entry
    workloads = {f"{w['benchmark']}.{w['workload']}": w for w in entry["workloads"]}
    assert sorted(workloads) == ["FusedAddRMSNormWorkloads.llama_bf16", "RMSNormWorkloads.decode_bf16",
                                 "RMSNormWorkloads.float32", "RMSNormWorkloads.llama_bf16"]
    for w in workloads.values():
        assert w["status"] == "verified" and "F.rms_norm(" in w["reference_source"], w
        assert w["kernel"]["median_ms"] > 0 and w["reference"]["median_ms"] > 0 and w["speedup"] > 0
    (svg,) = report["plots"]
    assert Path(svg).read_text().startswith("<svg ")

    # the card (a dry run writes it) shows them where the project's CARD.md says
    pushed = run_cli("push", "bench-org/rmsnorm", str(root), "--dry-run", "--allow-untested", "--partial",
                     "--matrix", str(matrix))
    assert pushed.returncode == 0, pushed.output
    card = (root / "build" / ".publisher" / "README.md").read_text()
    assert "### Against `F.rms_norm`, on each device this release was measured on" in card
    assert f"| `{name}` | `RMSNormWorkloads.llama_bf16` |" in card
    assert f"(media/benchmark-{entry['device_key']}.svg)" in card
