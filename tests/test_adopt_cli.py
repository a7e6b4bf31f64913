"""`publisher adopt` as users run it: the plan first, nothing of the author's
changed without --force (and then kept aside), a second run that does
nothing, a result `publisher check` accepts, JSON for scripts and agents."""

from __future__ import annotations

import ast
import json
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from adopt_fixtures import write, write_hands_project, write_layout_project, write_load_project, write_setup_project
from cli_helper import run_cli


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_changes_to_the_authors_files_need_force_and_nothing_is_written_without_it(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    before = _files(root)
    refused = run_cli("adopt", str(root))
    assert refused.returncode == 1, refused.output
    assert "PA161" in refused.stdout and "csrc/binding.cpp" in refused.stdout and "nothing written" in refused.stdout
    assert _files(root) == before
    assert "Traceback" not in refused.output


def test_dry_run_prints_the_plan_and_the_diffs_and_writes_nothing(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    before = _files(root)
    shown = run_cli("adopt", str(root), "--dry-run")
    assert shown.returncode == 0, shown.output
    assert "+#ifdef Py_LIMITED_API" in shown.stdout and "--- /dev/null" in shown.stdout
    assert 'scale(Tensor x, float factor=2.0) -> Tensor' in shown.stdout
    assert "dry run: nothing written" in shown.stdout
    assert _files(root) == before


def test_force_writes_the_port_keeps_the_originals_and_check_accepts_it(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    before = _files(root)
    done = run_cli("adopt", str(root), "--force")
    assert done.returncode == 0, done.output
    after = _files(root)
    backups = [rel for rel in after if rel.startswith("build/.publisher/adopt/")]
    changed = {rel for rel in before if after[rel] != before[rel]}
    assert changed == {"csrc/binding.cpp", "csrc/ops.cpp", "csrc/ops.h"}
    for rel in changed:  # every changed file's original is kept, byte for byte
        (kept,) = [b for b in backups if b.endswith("/" + rel)]
        assert after[kept] == before[rel]
    assert set(before) <= set(after)  # nothing of the author's deleted
    for new in ("build.toml", "torch-ext/torch_binding.cpp", "torch-ext/mini_ops/__init__.py",
                "torch-ext/mini_ops/helpers.py", "torch-ext/mini_ops/_C.py", "tests/test_mini_ops_ops.py"):
        assert new in after
    for rel in after:
        if rel.endswith(".py") and rel.startswith(("torch-ext/", "tests/")):
            ast.parse(after[rel])  # everything adopt writes in Python is Python
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output
    assert "mini-ops v1: folder OK" in checked.stdout


def test_a_second_run_does_nothing(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    assert run_cli("adopt", str(root), "--force").returncode == 0
    before = _files(root)
    again = run_cli("adopt", str(root))
    assert again.returncode == 0, again.output
    assert "nothing to do" in again.stdout
    assert _files(root) == before


def test_a_new_binding_after_adoption_is_planned_and_needs_force_again(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    assert run_cli("adopt", str(root), "--force").returncode == 0
    ported = (root / "csrc/binding.cpp").read_text()
    (root / "csrc/binding.cpp").write_text(ported.replace('  m.def("count", &count);',
                                                          '  m.def("count", &count);\n  m.def("neg", &split_sign);'))
    (root / "tests/test_mini_ops_ops.py").write_text((root / "tests/test_mini_ops_ops.py").read_text() + "# mine\n")
    planned = json.loads(run_cli("adopt", str(root), "--json").stdout)
    actions = {f["path"]: f["action"] for f in planned["files"]}
    assert actions["csrc/binding.cpp"] == "update" and actions["torch-ext/torch_binding.cpp"] == "update"
    assert "tests/test_mini_ops_ops.py" not in actions  # the tests are the author's once written
    assert "neg" in {op["name"] for op in planned["ops"]} and planned["ok"] is False
    assert run_cli("adopt", str(root), "--force").returncode == 0
    assert (root / "tests/test_mini_ops_ops.py").read_text().endswith("# mine\n")
    assert 'ops.def("neg(Tensor x) -> (Tensor, Tensor)");' in (root / "torch-ext/torch_binding.cpp").read_text()


def test_json_is_one_document_with_ops_files_and_findings(tmp_path):
    root = write_setup_project(tmp_path / "mini")
    doc = json.loads(run_cli("adopt", str(root), "--dry-run", "--json").stdout)
    assert doc["ok"] is True and doc["route"] == "setup.py" and doc["read"] == "static"
    assert doc["name"] == "mini-ops" and doc["python_name"] == "mini_ops" and doc["backends"] == ["cpu"]
    assert {op["name"]: op["shim"] for op in doc["ops"]}["scale"] is True
    binding = next(f for f in doc["files"] if f["path"] == "csrc/binding.cpp")
    assert binding["action"] == "update" and binding["yours"] and binding["needs_force"] and "+#else" in binding["diff"]
    assert doc["written"] == [] and doc["dry_run"] is True


def test_what_needs_hands_fails_the_run_but_the_rest_is_ported(tmp_path):
    root = write_hands_project(tmp_path / "hands")
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert [op["name"] for op in doc["ops"]] == ["good"] and doc["complete"] is False
    assert {(f["code"], f["line"]) for f in doc["findings"] if f["severity"] == "error"} >= {
        ("PA111", 12), ("PA112", 13), ("PA111", 15), ("PA111", 16)}
    assert doc["written"]


def test_the_agent_layout_gets_a_kernel_name_an_edition_and_the_builds_ops(tmp_path):
    root = write_layout_project(tmp_path / "agent")
    assert run_cli("check", str(root)).returncode == 1  # as written: name, edition and pybind11 refused
    done = run_cli("adopt", str(root), "--force", "--version", "3", "--repo", "me/agent-kernels")
    assert done.returncode == 0, done.output
    toml = (root / "build.toml").read_text()
    assert 'name = "agent-kernels"' in toml and "edition = 5" in toml and 'license = "mit"' in toml
    assert "version = 3" in toml and 'repo-id = "me/agent-kernels"' in toml
    assert "# Agent kernels" in toml  # the author's comments stay
    assert "from ._ops import ops\n" in (root / "torch-ext/agent_kernels/__init__.py").read_text()
    assert 'kernels.get_kernel("me/agent-kernels", version=3, trust_remote_code=["me/agent-kernels"])' in (
        root / "tests/test_agent_kernels_ops.py").read_text()  # loads whether or not the Hub trusts `me`
    checked = run_cli("check", str(root))
    assert checked.returncode == 0, checked.output
    assert run_cli("adopt", str(root)).returncode == 0  # and again: nothing to do


def test_a_load_project_gets_its_wrapper_carried_and_its_gpu_architectures(tmp_path):
    root = write_load_project(tmp_path / "attn")
    done = run_cli("adopt", str(root), "--force", "--license", "apache-2.0")
    assert done.returncode == 0, done.output
    toml = (root / "build.toml").read_text()
    assert 'cuda-capabilities = ["8.0+PTX"]' in toml and 'license = "apache-2.0"' in toml
    wrapper = (root / "torch-ext/mini_attn/attention.py").read_text()
    assert "from . import mini_attn  # publisher adopt: was load(name='mini_attn', ...)" in wrapper
    assert not (root / "torch-ext/mini_attn/bench.py").exists()
    assert run_cli("check", str(root)).returncode == 0


def test_bad_input_is_a_clear_error_without_a_traceback(tmp_path):
    missing = run_cli("adopt", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a folder" in missing.stderr
    root = write_setup_project(tmp_path / "mini")
    named = run_cli("adopt", str(root), "--name", "Bad_Name")
    assert named.returncode == 2 and "use e.g. --name bad-name" in named.stderr
    repo = run_cli("adopt", str(root), "--repo", "no-slash")
    assert repo.returncode == 2
    (root / "setup.py").write_text("setup(\n")
    broken = run_cli("adopt", str(root), "--json")
    assert broken.returncode == 1 and json.loads(broken.stdout)["ok"] is False
    for result in (missing, named, repo, broken):
        assert "Traceback" not in result.output


def test_architectures_a_setup_py_picks_when_it_runs_are_not_pinned(tmp_path):
    """fused-ssim's shape: the GPU's own arch when one is found, else a fallback list (without sm_90).
    Recorded under recorders that find no GPU, that list would build a kernel an H100 cannot run."""
    from adopt_fixtures import DYNAMIC_CPP, DYNAMIC_CU, write

    setup = (
        "import torch\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension, BuildExtension\n"
        "args = {'cxx': ['-O3'], 'nvcc': ['-O3']}\n"
        "try:\n    major, minor = torch.cuda.get_device_capability(0)\n    args['nvcc'].append(f'-arch=sm_{major}{minor}')\n"
        "except Exception:\n    args['nvcc'] += ['-gencode=arch=compute_75,code=sm_75', '-gencode=arch=compute_89,code=sm_89']\n"
        "ext = [CUDAExtension('dyn_ext', ['dyn.cpp', 'dyn_kernel.cu'], extra_compile_args=args)] "
        "if torch.cuda.is_available() else []\n"
        "setup(name='dyn-ext', ext_modules=ext, cmdclass={'build_ext': BuildExtension})\n")
    root = write(tmp_path / "dyn", {"setup.py": setup, "dyn.cpp": DYNAMIC_CPP, "dyn_kernel.cu": DYNAMIC_CU})
    done = run_cli("adopt", str(root), "--force", "--license", "apache-2.0")
    assert done.returncode == 0, done.output
    assert "PA143" in done.output and "7.5, 8.9" in done.output
    assert "cuda-capabilities" not in (root / "build.toml").read_text()


TWIN_SETUP = """\
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

os.environ["TORCH_CUDA_ARCH_LIST"] = "3.7+PTX;6.1;7.5"
setup(name="twin", packages=["twin"],
      ext_modules=[CppExtension("twin.ops_cpu", ["twin/ops_cpu.cpp"], extra_compile_args=["-fopenmp"]),
                   CUDAExtension("twin.ops_cuda", ["twin/ops_cuda.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""
TWIN_SOURCE = """\
#include <torch/extension.h>
torch::Tensor isotonic(torch::Tensor y) { return y; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("isotonic", &isotonic, "the %s kernel"); }
"""


def test_a_cpu_and_a_cuda_extension_binding_the_same_functions_become_one_op_in_both_variants(tmp_path):
    # torchsort: isotonic_cpu and isotonic_cuda bind the same functions; an old TORCH_CUDA_ARCH_LIST (pointnet2_ops)
    root = write(tmp_path / "twin", {"setup.py": TWIN_SETUP, "twin/__init__.py": "from .ops_cpu import isotonic\n",
                                     "twin/ops_cpu.cpp": TWIN_SOURCE % "cpu", "twin/ops_cuda.cu": TWIN_SOURCE % "cuda"})
    done = run_cli("adopt", str(root), "--force", "--license", "mit", "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0, doc["findings"]
    assert [op["schema"] for op in doc["ops"]] == ["isotonic(Tensor y) -> Tensor"]
    (outdated,) = [f for f in doc["findings"] if f["code"] == "PA144"]
    assert "3.7+PTX, 6.1" in outdated["message"]
    kernels = tomllib.loads((root / "build.toml").read_text())["kernel"]
    assert {name: k["backend"] for name, k in kernels.items()} == {
        "twin_ops_cpu": "cpu", "twin_ops_cuda": "cuda", "twin_ops_cpu_cuda": "cuda"}  # the cuda variant has both
    assert "cuda-capabilities" not in kernels["twin_ops_cuda"]
    # in the cuda variant the CPU source is compiled inside a namespace of its own: both define `isotonic`
    (wrapper,) = kernels["twin_ops_cpu_cuda"]["src"]
    enclosed = (root / wrapper).read_text()
    assert '#include "../../twin/ops_cpu.cpp"' in enclosed and "namespace publisher_twin_ops_cpu_cuda {" in enclosed
    assert enclosed.index("#include <torch/all.h>") < enclosed.index("namespace publisher_twin_ops_cpu_cuda {")
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops)" in (root / "twin/ops_cpu.cpp").read_text()
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops)" in (root / "twin/ops_cuda.cu").read_text()
    assert run_cli("check", str(root)).returncode == 0


def test_cuda_sources_get_the_defines_torch_extensions_compile_with_unless_the_script_undefines_them(tmp_path):
    # torch.utils.cpp_extension compiles .cu files with -D__CUDA_NO_HALF_OPERATORS__ & co; the build does not
    setup = TWIN_SETUP.replace('CUDAExtension("twin.ops_cuda", ["twin/ops_cuda.cu"])',
                               'CUDAExtension("twin.ops_cuda", ["twin/ops_cuda.cu"], extra_compile_args={"nvcc": '
                               '["-U__CUDA_NO_HALF_CONVERSIONS__", "--use_fast_math"]})')
    root = write(tmp_path / "twin", {"setup.py": setup, "twin/__init__.py": "from .ops_cpu import isotonic\n",
                                     "twin/ops_cpu.cpp": TWIN_SOURCE % "cpu", "twin/ops_cuda.cu": TWIN_SOURCE % "cuda"})
    done = run_cli("adopt", str(root), "--force", "--license", "mit")
    assert done.returncode == 0, done.output
    kernels = tomllib.loads((root / "build.toml").read_text())["kernel"]
    assert kernels["twin_ops_cuda"]["cuda-flags"] == [
        "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
        "--use_fast_math"]
    assert "cuda-flags" not in kernels["twin_ops_cpu"] and "cuda-flags" not in kernels["twin_ops_cpu_cuda"]
