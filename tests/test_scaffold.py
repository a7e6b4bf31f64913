"""`publisher init`: a new project passes `check` as generated (every backend
choice), its files are what the user's tools read (Python that compiles, a
card the push stage renders, a workflow actionlint accepts, calling
publisher's reusable workflow at this release); refusals for bad names,
backends, licenses and non-empty folders change nothing; `--ci` adds only the
workflow. The slow tests build the scaffold (cpu: build, test and benchmark it
here; cuda: compile every capability and load-check it with a CUDA torch)."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from publisher import __version__
from publisher.consumer import Publisher
from publisher.data import read_yaml
from publisher.project.load import require_project
from publisher.push.card import VariantRow, render

from cli_helper import run_cli
from matrix_fixtures import GPU_RUNNER_MATRIX, local_cpu_variant_name, write_local_matrix
from test_workflows import _actionlint

REUSABLE = read_yaml("workflow.yaml")
SCAFFOLD_FILES = {
    "build.toml", "torch-ext/torch_binding.h", "torch-ext/torch_binding.cpp", "torch-ext/my_kernel/__init__.py",
    "tests/conftest.py", "tests/test_silu.py", "benchmarks/benchmark.py", "CARD.md", ".gitignore",
    ".github/workflows/release.yml",
}
KERNEL_FILES = {"cpu": "silu_cpu/silu.cpp", "cuda": "silu_cuda/silu.cu", "rocm": "silu_cuda/silu.cu"}


def init(tmp_path: Path, *args: str, cwd: Path | None = None):
    return run_cli("init", *args, cwd=cwd or tmp_path)


def files_under(root: Path) -> set[str]:
    """The files of a project, without its .git folder."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts}


def check_json(path: Path) -> dict:
    result = run_cli("check", str(path), "--format", "json")
    assert result.returncode == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("backends", [None, "cpu", "cuda", "rocm", "all"])
def test_new_project_passes_check_without_warnings(tmp_path, backends):
    result = init(tmp_path, "my-org/my-kernel", *(["--backends", backends] if backends else []))
    assert result.returncode == 0, result.output
    root = tmp_path / "my-kernel"
    report = check_json(root)
    assert report["ok"] and report["name"] == "my-kernel" and report["edition"] == 5
    assert [f for f in report["findings"] if f["severity"] != "info"] == []

    chosen = {"cpu", "cuda"} if backends is None else {"cpu", "cuda", "rocm"} if backends == "all" else {backends}
    project = require_project(root)
    general = project.config.general
    assert set(general.backends) == chosen
    assert (general.version, general.license, general.hub_repo_id) == (1, "Apache-2.0", "my-org/my-kernel")
    assert {k.backend for k in project.config.kernels} == chosen
    assert files_under(root) == SCAFFOLD_FILES | {KERNEL_FILES[b] for b in chosen}


def test_binding_registers_one_implementation_per_backend(tmp_path):
    assert init(tmp_path, "my-org/my-kernel", "--backends", "cpu,cuda,rocm").returncode == 0
    binding = (tmp_path / "my-kernel" / "torch-ext" / "torch_binding.cpp").read_text()
    assert "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops)" in binding
    assert 'ops.def("silu(Tensor x) -> Tensor");' in binding
    assert "#if defined(CPU_KERNEL)\nTORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops)" in binding
    # ROCm torch dispatches GPU tensors under the CUDA key; the .cu file serves both
    assert "#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)\nTORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops)" in binding
    build = (tmp_path / "my-kernel" / "build.toml").read_text()
    assert build.count('src = ["silu_cuda/silu.cu"]') == 2


def test_python_files_compile_and_export_the_op(tmp_path):
    assert init(tmp_path, "my-org/my-kernel").returncode == 0
    root = tmp_path / "my-kernel"
    for path in root.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")
    package = ast.parse((root / "torch-ext" / "my_kernel" / "__init__.py").read_text())
    exported = next(n.value for n in package.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__")
    assert [e.value for e in exported.elts] == ["silu"]
    tests = (root / "tests" / "test_silu.py").read_text() + (root / "tests" / "conftest.py").read_text()
    # loads for a trusted org, an untrusted one and a user account alike (the Hub is not asked at init)
    assert 'kernels.get_kernel("my-org/my-kernel", version=1, trust_remote_code=["my-org/my-kernel"])' in tests
    assert "@pytest.mark.kernels_ci" in tests
    bench = (root / "benchmarks" / "benchmark.py").read_text()
    assert "class MyKernelBenchmark(Benchmark):" in bench and "def verify_float32" in bench


def test_card_renders_on_push_with_the_release_values(tmp_path):
    assert init(tmp_path, "my-org/my-kernel").returncode == 0
    project = require_project(tmp_path / "my-kernel")
    rows = [VariantRow("torch215-cxx11-cpu-x86_64-linux", "cpu", (), "passed (15 passed) on CPU")]
    card = render(project, "someone/fork", 3, rows, signed=False, publisher=Publisher.USER)
    assert card.text.startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\n")
    assert "\n# my-kernel\n" in card.text and "{#" not in card.text and "{{" not in card.text
    assert ('# someone is a user account, and the Hub trusts only some orgs as kernel publishers: allow this '
            'repository by name to load its code\n'
            'my_kernel = get_kernel("someone/fork", version=3, trust_remote_code=["someone/fork"])\n') in card.text
    assert "- `silu`" in card.text
    assert "| `torch215-cxx11-cpu-x86_64-linux` | cpu | - | any CPU | passed (15 passed) on CPU |" in card.text
    # remote `kernels benchmark REPO` cannot load a third-party kernel in kernels 0.17.2: a snapshot can
    assert ("hf download someone/fork --repo-type kernel --revision v3 --local-dir fork-v3\n"
            "kernels benchmark ./fork-v3\n") in card.text
    assert "kernels benchmark someone/fork" not in card.text
    trusted = render(project, "trusted-org/fork", 3, rows, signed=False, publisher=Publisher.TRUSTED)
    assert '\nmy_kernel = get_kernel("trusted-org/fork", version=3)\n' in trusted.text
    assert "trust_remote_code" not in trusted.text
    assert card.media == {}


def test_workflow_calls_publishers_reusable_workflow_at_this_release(tmp_path):
    assert init(tmp_path, "my-org/my-kernel").returncode == 0
    path = tmp_path / "my-kernel" / ".github" / "workflows" / "release.yml"
    problems = _actionlint(path)
    assert problems == [], problems
    doc = yaml.safe_load(path.read_text())
    assert doc[True] == {"push": {"tags": ["v*"]}, "workflow_dispatch": None}  # YAML 1.1 reads `on` as True
    assert list(doc["jobs"]) == ["release"]
    job = doc["jobs"]["release"]
    assert REUSABLE["repository"] == "kernel-publisher/kernel-publisher"
    assert job["uses"] == f"{REUSABLE['repository']}/{REUSABLE['path']}@v{__version__}"
    assert job["permissions"] == {"contents": "read", "id-token": "write"}
    assert job["with"] == {"project": ".", "gpu-test": "hf-jobs:l4x1"}
    assert job["secrets"] == {"HF_TOKEN": "${{ secrets.HF_TOKEN }}"}
    text = path.read_text()
    assert "HF_TOKEN" in text.split("name: release")[0] and "job.write" in text  # the setup the author must do


def test_workflow_ref_override_and_its_refusal(tmp_path):
    result = init(tmp_path, "my-org/my-kernel", "--workflow-ref", "my-org/kernel-publisher@main")
    assert result.returncode == 0, result.output
    path = tmp_path / "my-kernel" / ".github" / "workflows" / "release.yml"
    assert yaml.safe_load(path.read_text())["jobs"]["release"]["uses"] == \
        f"my-org/kernel-publisher/{REUSABLE['path']}@main"
    for bad in ("my-org/kernel-publisher", "kernel-publisher@main", "a/b@", "a/b@-x", "a/b@has space"):
        result = init(tmp_path, "my-org/other", "--workflow-ref", bad)
        assert result.returncode == 2 and "OWNER/REPO@REF" in result.stderr, (bad, result.output)
    assert not (tmp_path / "other").exists()


def test_names_come_from_the_repo_id(tmp_path):
    result = init(tmp_path, "Some-Org/Fast_RMSNorm.v2", "--license", "mit")
    assert result.returncode == 0, result.output
    root = tmp_path / "Fast_RMSNorm.v2"  # the folder is NAME as given
    general = require_project(root).config.general
    assert (general.name, general.hub_repo_id, general.license) == ("fast-rmsnorm-v2", "Some-Org/Fast_RMSNorm.v2", "mit")
    assert (root / "torch-ext" / "fast_rmsnorm_v2" / "__init__.py").is_file()
    assert "class FastRmsnormV2Benchmark" in (root / "benchmarks" / "benchmark.py").read_text()


def test_explicit_path_and_json_report(tmp_path):
    result = init(tmp_path, "my-org/my-kernel", "somewhere/else", "--json")
    assert result.returncode == 0, result.output
    report = json.loads(result.stdout)
    root = tmp_path / "somewhere" / "else"
    assert report["ok"] and report["repo_id"] == "my-org/my-kernel" and report["backends"] == ["cpu", "cuda"]
    assert set(report["files"]) == {str((root / f).resolve()) for f in files_under(root)}
    assert report["overwritten"] == [] and report["tags"] == "v*"


@pytest.mark.parametrize("repo_id, says", [
    ("my-kernel", "OWNER/NAME"),
    ("a/b/c", "OWNER/NAME"),
    ("my-org/", "OWNER/NAME"),
    ("my org/kernel", "ASCII letters"),
    ("my-org/1kernel", "no valid kernel name"),
    ("my-org/__", "no valid kernel name"),
    ("my-org/" + "k" * 97, "96"),
    ("my-org/kérnel", "ASCII letters"),
    ("my-org/ker\0nel", "ASCII letters"),
])
def test_bad_repo_ids_are_usage_errors_with_the_fix(tmp_path, repo_id, says):
    result = init(tmp_path, repo_id)
    assert result.returncode == 2, result.output
    assert says in result.stderr and "hint:" in result.stderr and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("backends, says", [
    ("cdua", "did you mean `cuda`?"),
    ("metal", "no metal kernel template; it offers cpu, cuda, rocm"),
    ("cpu,xpu", "no xpu kernel template"),
    ("cpu,,cuda", "an empty backend name"),
    ("neuron", "no neuron kernel template"),
])
def test_backends_without_a_template_are_refused(tmp_path, backends, says):
    result = init(tmp_path, "my-org/my-kernel", "--backends", backends)
    assert result.returncode == 2 and says in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []


def test_backends_are_deduplicated_in_build_toml_order(tmp_path):
    assert init(tmp_path, "my-org/my-kernel", "--backends", "CUDA", "--backends", "cpu,cuda").returncode == 0
    assert require_project(tmp_path / "my-kernel").config.general.backends == ("cpu", "cuda")


@pytest.mark.parametrize("license_, says", [("apache", "did you mean"), ("", "--license is empty"),
                                             ('mit"', "not a license identifier"), ("gpl\nx", "not a license")])
def test_bad_license_is_refused(tmp_path, license_, says):
    result = init(tmp_path, "my-org/my-kernel", "--license", license_)
    assert result.returncode == 2 and says in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []


def test_non_empty_folder_is_refused_and_left_alone(tmp_path):
    root = tmp_path / "my-kernel"
    root.mkdir()
    (root / "notes.txt").write_text("mine")
    result = init(tmp_path, "my-org/my-kernel")
    assert result.returncode == 2 and "is not empty" in result.stderr and "--force" in result.stderr, result.output
    assert files_under(root) == {"notes.txt"}


def test_force_writes_the_scaffold_and_keeps_other_files(tmp_path):
    root = tmp_path / "my-kernel"
    (root / "tests").mkdir(parents=True)
    (root / "notes.txt").write_text("mine")
    (root / "tests" / "test_silu.py").write_text("old")
    result = init(tmp_path, "my-org/my-kernel", "--force", "--json")
    assert result.returncode == 0, result.output
    assert (root / "notes.txt").read_text() == "mine"
    assert (root / "tests" / "test_silu.py").read_text() != "old"
    assert [Path(p).name for p in json.loads(result.stdout)["overwritten"]] == ["test_silu.py"]
    assert check_json(root)["ok"]


def test_existing_project_points_at_ci(tmp_path):
    assert init(tmp_path, "my-org/my-kernel").returncode == 0
    result = init(tmp_path, "my-org/my-kernel")
    assert result.returncode == 2 and "publisher init --ci my-kernel" in result.stderr, result.output


@pytest.mark.parametrize("make", ["file", "folder-for-a-file"])
def test_what_no_file_can_replace_is_refused_even_with_force(tmp_path, make):
    if make == "file":
        (tmp_path / "my-kernel").write_text("a file")
    else:
        (tmp_path / "my-kernel" / "build.toml").mkdir(parents=True)
    result = init(tmp_path, "my-org/my-kernel", "--force")
    assert result.returncode == 2 and "Traceback" not in result.output, result.output
    assert "a file" in result.stderr or "is a folder" in result.stderr


@pytest.mark.parametrize("path", ["bad\0path", "x" * 300, "a/" * 2100])
def test_paths_no_file_system_holds_are_refused_without_a_traceback(tmp_path, path):
    for args in (("my-org/my-kernel", path), ("--ci", path)):
        result = init(tmp_path, *args)
        assert result.returncode in (2, 3) and "Traceback" not in result.output and "hint:" in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []


def test_ci_adds_only_the_workflow_of_an_existing_project(tmp_path):
    assert init(tmp_path, "my-org/my-kernel").returncode == 0
    root = tmp_path / "my-kernel"
    workflow = root / ".github" / "workflows" / "release.yml"
    workflow.unlink()
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    result = init(tmp_path, "--ci", "my-kernel")
    assert result.returncode == 0, result.output
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and p != workflow} == before
    assert yaml.safe_load(workflow.read_text())["jobs"]["release"]["with"]["project"] == "."
    assert "my-org/my-kernel" in workflow.read_text()

    result = init(tmp_path, "--ci", cwd=root)  # PATH defaults to the working directory
    assert result.returncode == 2 and "would overwrite" in result.stderr and "--force" in result.stderr
    workflow.write_text("mine")
    assert init(tmp_path, "--ci", "--force", cwd=root).returncode == 0
    assert workflow.read_text() != "mine" and _actionlint(workflow) == []


def test_ci_on_a_project_publisher_did_not_make(tmp_path):
    root = tmp_path / "rmsnorm"
    root.mkdir()
    (root / "build.toml").write_text(
        (Path(__file__).resolve().parents[1] / "kernel_projects" / "rmsnorm" / "build.toml").read_text())
    result = init(tmp_path, "--ci", str(root))
    assert result.returncode == 0, result.output
    text = (root / ".github" / "workflows" / "release.yml").read_text()
    assert "your-hf-org/rmsnorm" in text and files_under(root) == {"build.toml", ".github/workflows/release.yml"}


@pytest.mark.parametrize("build_toml, code, says", [
    (None, 2, "no build.toml"),
    ('[general]\nname = "x"\n', 1, "no [general.hub] repo-id"),
    ('[general.hub]\nrepo-id = "not an id"\n', 1, "is not a Hub repository id"),
    ("[general\n", 1, "invalid TOML"),
])
def test_ci_refusals(tmp_path, build_toml, code, says):
    if build_toml is not None:
        (tmp_path / "build.toml").write_text(build_toml)
    result = init(tmp_path, "--ci")
    assert result.returncode == code and says in result.stderr and "Traceback" not in result.output, result.output
    assert not (tmp_path / ".github").exists()


@pytest.mark.parametrize("args, says", [
    (("--ci", "--backends", "cpu"), "--ci only adds the release workflow"),
    (("--ci", "--license", "mit"), "--ci only adds the release workflow"),
    (("--ci", "my-org/my-kernel"), "is a repo id, not a folder"),
    (("--ci", "a", "b"), "too many arguments"),
    ((), "missing OWNER/NAME"),
    (("my-org/a", "b", "c"), "too many arguments"),
])
def test_argument_mistakes(tmp_path, args, says):
    result = init(tmp_path, *args)
    assert result.returncode == 2 and says in result.stderr, result.output


def test_new_project_is_a_git_repository_of_its_own(tmp_path):
    result = init(tmp_path, "my-org/my-kernel", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["git_initialized"], result.output
    top = subprocess.run(["git", "-C", str(tmp_path / "my-kernel"), "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert Path(top) == (tmp_path / "my-kernel").resolve()


def test_new_project_inside_a_git_repository_stays_in_its_folder(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    result = init(tmp_path, "my-org/my-kernel", "kernels/my-kernel")
    assert result.returncode == 0, result.output
    root = tmp_path / "kernels" / "my-kernel"
    assert not (root / ".git").exists() and not (tmp_path / ".github").exists()
    assert (root / ".github" / "workflows" / "release.yml").is_file()
    assert "is inside the git repository" in result.stdout and "publisher init --ci kernels/my-kernel" in result.stdout


def test_ci_for_a_project_inside_a_larger_repository_writes_at_its_top(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert init(tmp_path, "my-org/my-kernel", "kernels/my-kernel").returncode == 0
    result = init(tmp_path, "--ci", "kernels/my-kernel")
    assert result.returncode == 0, result.output
    workflow = tmp_path / ".github" / "workflows" / "release-my-kernel.yml"
    doc = yaml.safe_load(workflow.read_text())
    assert doc["name"] == "release-my-kernel" and doc[True]["push"]["tags"] == ["my-kernel-v*"]
    assert doc["jobs"]["release"]["with"]["project"] == "kernels/my-kernel"
    assert _actionlint(workflow) == []
    assert "my-kernel-v*" in result.stdout


# -- slow: the scaffold built and tested -----------------------------------------------------------

@pytest.mark.slow
def test_cpu_scaffold_builds_and_its_tests_and_benchmark_pass(tmp_path):
    assert init(tmp_path, "my-org/my-kernel", "--backends", "cpu").returncode == 0
    root = tmp_path / "my-kernel"
    matrix = write_local_matrix(tmp_path / "cpu-matrix.yaml", compute="cpu")
    build = run_cli("build", str(root), "--local", "--matrix", str(matrix), "--no-hub-cache")
    assert build.returncode == 0, build.output
    result = run_cli("test", str(root), "--matrix", str(matrix), "--all-tests", "--json")
    assert result.returncode == 0, result.output
    ((name, entry),) = json.loads(result.stdout)["variants"].items()
    assert name == local_cpu_variant_name() and entry["status"] == "passed", entry
    assert entry["tests"]["passed"] == 16 and entry["tests"]["failed"] == 0, entry

    # the benchmark, run by kernels' own runner as `kernels benchmark ./my-kernel` does, verifying each workload
    from kernels.cli.benchmark import discover_benchmark_classes, run_benchmark_class

    (bench,) = discover_benchmark_classes(root / "benchmarks" / "benchmark.py", root)
    results, _ = run_benchmark_class(bench, iterations=2, warmup=1, repo_id=str(root), is_local=True, revision="local")
    assert set(results) == {"float32", "bfloat16"} and all(r.verified for r in results.values()), results

    # and by `publisher bench`, which times each workload beside its reference
    benched = run_cli("bench", str(root), "--matrix", str(matrix), "--iterations", "2", "--warmup", "1", "--json")
    assert benched.returncode == 0, benched.output
    entry = json.loads(benched.stdout)["variants"][local_cpu_variant_name()]
    assert entry["status"] == "ok" and entry["device"]["kind"] == "cpu", entry
    assert {(w["workload"], w["status"]) for w in entry["workloads"]} == {("float32", "verified"), ("bfloat16", "verified")}
    assert all(w["kernel"]["median_ms"] > 0 and w["reference"]["median_ms"] > 0 for w in entry["workloads"])


@pytest.mark.slow
def test_cuda_scaffold_compiles_for_every_capability_and_loads_with_a_cuda_torch(tmp_path):
    assert init(tmp_path, "my-org/my-kernel", "--backends", "cuda").returncode == 0
    root = tmp_path / "my-kernel"
    variant = "torch211-cxx11-cu130-x86_64-linux"
    build = run_cli("build", str(root), "--matrix", str(GPU_RUNNER_MATRIX), "--variant", variant, "--no-hub-cache",
                    "--json", timeout=3000)
    assert build.returncode == 0, (build.output, (root / "build" / ".publisher" / "logs" / f"{variant}.log").read_text()[-3000:])
    meta = json.loads((root / "build" / variant / "metadata.json").read_text())
    assert meta["backend"] == {"type": "cuda", "archs": ["7.5", "8.0", "9.0", "10.0", "12.0+PTX"]}
    # no GPU here: the variant is imported with its CUDA torch and its op registration checked
    result = run_cli("test", str(root), "--matrix", str(GPU_RUNNER_MATRIX), "--allow-load-only", "--json")
    assert result.returncode == 0, result.output
    ((name, entry),) = json.loads(result.stdout)["variants"].items()
    assert name == variant and entry["status"] == "loaded-not-run" and entry["device"]["cuda"] == "13.0", entry
