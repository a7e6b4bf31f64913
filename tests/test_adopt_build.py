"""An adopted CPU extension all the way: adopt -> check -> build -> test, and
the author's own setup.py build of the same (guarded) sources still works and
computes what the kernel computes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from adopt_fixtures import write_setup_project
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def adopted(tmp_path_factory) -> Path:
    root = write_setup_project(tmp_path_factory.mktemp("adopt") / "mini")
    write_local_matrix(root / "matrix.yaml", compute="cpu")  # the project's matrix: the running torch's cpu cell
    done = run_cli("adopt", str(root), "--force")
    assert done.returncode == 0, done.output
    return root


def test_the_adopted_project_builds_and_its_written_tests_pass(adopted):
    built = run_cli("build", str(adopted), "--local", "--json", timeout=1200)
    report = json.loads(built.stdout)
    assert built.returncode == 0, report
    (entry,) = report["variants"]
    assert entry["state"] == "built" and entry["abi"]["ok"], entry
    tested = run_cli("test", str(adopted), "--json", timeout=1200)
    result = json.loads(tested.stdout)
    assert tested.returncode == 0, result
    (variant,) = result["variants"].values()
    # 7 ops: each registered with its schema and called on inputs of its declared types; scale also against scale_ref
    assert variant["status"] == "passed" and variant["tests"]["passed"] == 14 and variant["tests"]["failed"] == 0


def test_the_authors_setup_py_still_builds_the_same_sources_and_computes_the_same(adopted, tmp_path):
    copy = tmp_path / "own-build"
    shutil.copytree(adopted, copy, ignore=shutil.ignore_patterns("build", "torch-ext", "tests"))
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=copy, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (so,) = (copy / "mini_ops").glob("_C*.so")
    spec = importlib.util.spec_from_file_location("mini_ops._C", so)
    own = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(own)

    variant = next(p for p in (adopted / "build").iterdir() if (p / "metadata.json").is_file())
    ops_id = json.loads((variant / "metadata.json").read_text())["id"]
    torch.ops.load_library(str(next(variant.glob("*.abi3.so"))))
    ops = getattr(torch.ops, ops_id)

    x, a, b = (torch.randn(5, 7, generator=torch.Generator().manual_seed(i)) for i in range(3))
    assert torch.equal(own.scale(x, 3.0), ops.scale(x, 3.0)) and torch.equal(own.scale(x), ops.scale(x))
    out_own, out_op = torch.zeros(5, 7), torch.zeros(5, 7)
    own.add_into(out_own, a, b)
    ops.add_into(out_op, a, b)
    assert torch.equal(out_own, out_op) and torch.equal(out_op, a + b)
    assert all(torch.equal(p, q) for p, q in zip(own.split_sign(x), ops.split_sign(x), strict=True))
    assert torch.equal(own.maybe_bias(x, bias=a, twice=True), ops.maybe_bias(x, bias=a, twice=True))
    assert torch.equal(own.sum_dims(x, [1]), ops.sum_dims(x, [1]))
    assert own.count(x, 3) == ops.count(x, 3) == 105
    assert torch.equal(own.by_mode(x), ops.by_mode(x)) and torch.equal(own.by_mode(x, mode="keep"), ops.by_mode(x, mode="keep"))


def _adopt_build_test(root: Path) -> tuple[dict, dict]:
    """adopt --force, build --local (the running torch's cpu cell), test: (adopt's report, the variant's test entry)."""
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    built = run_cli("build", str(root), "--local", "--json", timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    tested = run_cli("test", str(root), "--json", timeout=1200)
    assert tested.returncode == 0, tested.stdout
    (variant,) = json.loads(tested.stdout)["variants"].values()
    return json.loads(done.stdout), variant


def _through_kernels(root: Path, check: str) -> None:
    """`check` run in a fresh interpreter with `k`, the kernel built in root/build, loaded through kernels."""
    script = ("import sys, pathlib, torch, kernels\n"
              "k = kernels.get_local_kernel(pathlib.Path(sys.argv[1]), backend='cpu')\n" + check + "print('ok')\n")
    loaded = subprocess.run([sys.executable, "-c", script, str(root / "build")], capture_output=True, text=True,
                            timeout=300)
    assert loaded.stdout.strip() == "ok", loaded.stdout + loaded.stderr


def test_a_module_per_build_flavour_builds_and_passes_as_the_cpu_flavour(tmp_path):
    """`#ifdef USE_CUDA` / `#else` PYBIND11_MODULE blocks: the cpu variant compiles the `#else` one, which
    registers scale_cpu; the generated tests call scale through kernels and pass."""
    from adopt_fixtures import write_flavours_project

    _, variant = _adopt_build_test(write_flavours_project(tmp_path / "flavours"))
    assert variant["status"] == "passed" and variant["tests"]["failed"] == 0, variant


def test_packages_installed_side_by_side_become_subpackages_whose_relative_imports_hold(tmp_path):
    """`functions` and `modules` (find_packages) importing each other relatively: one kernel package holding
    both, no PA121; the layer of `modules` runs the op forward and backward through the loaded kernel."""
    from adopt_fixtures import write_sibling_packages_project

    root = write_sibling_packages_project(tmp_path / "msda")
    report, _ = _adopt_build_test(root)
    assert not [f for f in report["findings"] if f["code"] == "PA121"]
    package = root / "torch-ext/multiscalescale"
    assert (package / "modules/scale.py").read_text().count("from ..functions import ScaleFunction") == 1
    _through_kernels(root, "x = torch.randn(3, 4, requires_grad=True)\ny = k.modules.Scale(3.0)(x)\n"
                           "y.sum().backward()\n"
                           "assert torch.equal(y, x * 3) and torch.equal(x.grad, torch.full_like(x, 3.0))\n")


def test_a_load_extension_named_like_a_module_of_its_package_still_gets_its_ops(tmp_path):
    """pkg/knn.py builds `knn = load(name="knn")`: the extension module is carried under a free name and the
    load() site imports it, so knn() runs the op through the loaded kernel (no PA121, no op left out)."""
    from adopt_fixtures import write_load_named_like_a_module_project

    root = write_load_named_like_a_module_project(tmp_path / "points")
    report, _ = _adopt_build_test(root)
    assert not [f for f in report["findings"] if f["code"] == "PA121"]
    _through_kernels(root, "x = torch.tensor([[0.0, 3.0, 1.0, 2.0]])\nassert k.knn(x, 2).tolist() == [[1, 3]]\n"
                           "assert k.dist(torch.ones(2), torch.zeros(2)).tolist() == [1.0, 1.0]\n")
