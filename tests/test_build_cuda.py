"""A CUDA variant against a PyPI CUDA torch (torch 2.11, CUDA 13.0): the
toolchain is created from PyPI, the kernel compiles and links, and the .so
imports with that torch and registers its ops (no GPU needed to import)."""

from __future__ import annotations

import json
import subprocess

import pytest

from publisher.plan.matrix import load_matrix
from publisher.plan.planner import make_plan
from publisher.project.load import require_project
from publisher.toolchains.provision import ensure_toolchain

from build_fixtures import variant_script, write_tiny_project
from cli_helper import run_cli
from matrix_fixtures import GPU_RUNNER_MATRIX

pytestmark = pytest.mark.slow

VARIANT = "torch211-cxx11-cu130-x86_64-linux"


def test_cuda_variant_compiles_links_and_imports_with_its_torch(tmp_path):
    root = write_tiny_project(tmp_path / "tiny")
    result = run_cli("build", str(root), "--matrix", str(GPU_RUNNER_MATRIX), "--variant", VARIANT, "--json", timeout=3000)
    report = json.loads(result.stdout)
    entry = report["variants"][0]
    assert result.returncode == 0, (entry, (root / "build" / ".publisher" / "logs" / f"{VARIANT}.log").read_text()[-3000:])
    assert entry["state"] == "built" and entry["abi"]["ok"], entry

    variant = root / "build" / VARIANT
    meta = json.loads((variant / "metadata.json").read_text())
    assert meta["backend"] == {"type": "cuda", "archs": ["8.0", "9.0+PTX"]}
    assert meta["provenance"]["toolchain"]["torch"].startswith("2.11.0")

    project = require_project(root)
    planned = make_plan(project, load_matrix(GPU_RUNNER_MATRIX)).by_name()[VARIANT]
    toolchain = ensure_toolchain(planned.toolchain)
    assert toolchain.cuda_version == "13.0" and toolchain.nvcc
    script = variant_script(variant, """
op = ops.scale
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "schema": str(op.default._schema)}))
""")
    out = subprocess.run([toolchain.python, "-c", script], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["torch"].startswith("2.11.0") and seen["cuda"] == "13.0"
    assert seen["schema"].startswith(f"{meta['id']}::scale(") and "float factor" in seen["schema"]
