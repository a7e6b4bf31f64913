"""A CPU extension beside a CUDA one (longcw/RoIAlign.pytorch's shape) becomes
one kernel with a cpu and a cuda variant; the tests adopt writes for it call
each op on the device of the variant under test (its metadata.json names the
backend), so the cpu variant is judged on the CPU, never failed for asking a
torch without CUDA for a CUDA tensor."""

from __future__ import annotations

import json

import pytest

from publisher.adopt.plan import make_plan

from adopt_fixtures import write_pair_project
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix


def test_the_generated_tests_of_a_cpu_and_cuda_pair_run_on_the_variants_device(tmp_path):
    plan = make_plan(write_pair_project(tmp_path / "pair"))
    assert 'backends = ["cpu", "cuda"]' in next(c.new for c in plan.changes if c.path == "build.toml")
    text = next(c.new for c in plan.changes if c.path == "tests/test_pair_ops.py")
    assert 'DEVICE = "cuda"' not in text
    # the device is read from the loaded variant, after the kernel is loaded
    assert text.index("kernel = kernels.get_kernel(") < text.index("DEVICE = DEVICE_TYPES[")
    assert '["backend"]["type"]' in text


@pytest.mark.slow
def test_the_cpu_variant_of_a_cpu_and_cuda_pair_passes_on_the_cpu(tmp_path):
    root = write_pair_project(tmp_path / "pair")
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    done = run_cli("adopt", str(root), "--force", "--license", "mit")
    assert done.returncode == 0, done.output
    made = run_cli("build", str(root), "--local", timeout=1200)
    assert made.returncode == 0, made.output
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    # forward ran on CPU tensors and wrote its output: passed, resting on ops run (no reference in the project)
    assert variant["status"] == "passed", variant
    assert variant["tests"]["failed"] == 0 and variant["checks"] == {"ran": 1, "reference": 0}, variant
