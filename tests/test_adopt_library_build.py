"""Adopted projects that register their ops themselves, built and loaded: the
kernel registers under its own namespace, so it loads side by side with the
author's own build of the same (guarded) sources, its Python autograd and
fake registrations follow it, and RegisterOperators' ops keep their schemas
and behaviour."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adopt_fixtures import write_library_project, write_operators_project
from build_fixtures import variant_script
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix

pytestmark = pytest.mark.slow


def _adopt_and_build(root: Path) -> Path:
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    done = run_cli("adopt", str(root), "--force")
    assert done.returncode == 0, done.output
    built = run_cli("build", str(root), "--local", "--json", timeout=1800)
    (entry,) = json.loads(built.stdout)["variants"]
    assert built.returncode == 0 and entry["state"] == "built", built.output[-3000:]
    return next(p for p in (root / "build").iterdir() if (p / "metadata.json").is_file())


def _run(script: str) -> dict:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_kernel_and_the_authors_build_load_side_by_side(tmp_path):
    root = write_library_project(tmp_path / "libmath")
    variant = _adopt_and_build(root)
    own = tmp_path / "own-build"
    shutil.copytree(root, own, ignore=shutil.ignore_patterns("build", "torch-ext", "tests"))
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=own, capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (library_so,) = (own / "libmath").glob("_C*.so")
    result = _run(variant_script(variant, f"""
torch.ops.load_library({str(library_so)!r})   # the author's build: namespace libmath
a, b = torch.randn(4, 5, requires_grad=True), torch.randn(4, 5)
mine = module.ops.muladd(a, b, 2.0)            # the kernel's Python API: its own namespace
mine.sum().backward()                          # register_autograd followed the op
theirs = torch.ops.libmath.muladd(a.detach(), b, 2.0)
out = torch.empty(4, 5)
ops.add_out(a.detach(), b, out)
fake = torch._subclasses.fake_tensor.FakeTensorMode()
with fake:
    shape = list(ops.muladd(torch.empty(3, 2), torch.empty(3, 2), 1.0).shape)  # register_fake followed it too
print(json.dumps({{"namespace": meta["id"], "same": torch.equal(mine, theirs), "grad": torch.equal(a.grad, b),
                  "out": torch.equal(out, a.detach() + b), "fake": shape,
                  "rows": ops.gather_rows(torch.arange(6.0).view(3, 2), torch.tensor([2, 0])).tolist()}}))
"""))
    assert result["namespace"] != "libmath" and result["same"] and result["grad"] and result["out"]
    assert result["fake"] == [3, 2] and result["rows"] == [[4.0, 5.0], [0.0, 1.0]]


def test_register_operators_ops_keep_their_schemas_and_behaviour(tmp_path):
    root = write_operators_project(tmp_path / "segs")
    variant = _adopt_and_build(root)
    result = _run(variant_script(variant, """
src, indptr = torch.arange(6.0), torch.tensor([0, 2, 2, 6])
print(json.dumps({"sum": module.segment_sum(src, indptr).tolist(), "count": ops.segment_count(indptr).tolist(),
                  "version": module.version, "schema": str(ops.segment_sum.default._schema).split("::", 1)[1]}))
"""))
    assert result == {"sum": [1.0, 0.0, 14.0], "count": [2, 0, 4], "version": 7,
                      "schema": "segment_sum(Tensor src, Tensor indptr, int? size) -> Tensor"}
