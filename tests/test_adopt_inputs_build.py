"""A correct CPU extension whose ops take an int64 index, int32 offsets with an
output buffer shaped by the other arguments, and complex input, all the way:
adopt -> build -> test. Its generated tests call each op as the package's own
wrappers do, so a correct kernel is never `failed` for our guesses; the op
nothing in the project calls refuses the guessed inputs and leaves the variant
`untested` with the INPUTS line to edit; once edited as the fix says, the
variant passes, and the report and the card say the verdict rests on ops run
only (the project has no test comparing the kernel with a reference)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from publisher.push.card import describe_test

from adopt_fixtures import write_cpu_in_cuda_project, write_index_project
from cli_helper import run_cli
from matrix_fixtures import write_local_matrix

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = write_index_project(tmp_path_factory.mktemp("adopt") / "index")
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    done = run_cli("adopt", str(root), "--force")
    assert done.returncode == 0, done.output
    made = run_cli("build", str(root), "--local", "--json", timeout=1200)
    assert made.returncode == 0, made.output
    return root


def _test(root: Path) -> dict:
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    return variant


def test_index_offsets_and_complex_ops_run_and_the_op_nobody_calls_needs_inputs(built):
    variant = _test(built)
    # gather_rows (int64 index), segment_sum (int32 offsets, out shaped by both), magnitude (complex64) ran;
    # pick refused the guessed float inputs: not judged, the fix names the line
    assert variant["status"] == "untested", variant
    assert variant["tests"] == {"passed": 7, "failed": 0, "skipped": 1, "errors": 0}
    assert "pick refused guessed inputs (RuntimeError: where must be an int32 tensor)" in variant["reason"]
    line = re.search(r"edit INPUTS at tests/test_index_ops_ops\.py:(\d+)", variant["fix"])
    assert line, variant["fix"]

    # the author gives pick what it expects, as the fix says; no rebuild
    tests = built / "tests/test_index_ops_ops.py"
    lines = tests.read_text().splitlines()
    number = int(line.group(1))
    assert lines[number - 1].startswith('    "pick": lambda')
    lines[number - 1] = ('    "pick": lambda: (torch.randn(8, 64, device=DEVICE), '
                         'torch.zeros(3, dtype=torch.int32, device=DEVICE)),')
    tests.write_text("\n".join(lines) + "\n")
    variant = _test(built)
    assert variant["status"] == "passed" and variant["tests"]["passed"] == 8, variant
    assert variant["suite"] == "ops-run" and variant["checks"] == {"ran": 4, "reference": 0}
    assert describe_test(variant).startswith("passed (ops run only: 4 op(s) called and returned what their schemas "
                                             "say, none compared with a reference; the project has no tests of its own)")


def test_a_stack_mode_op_runs_on_batch_lengths_that_hold_its_rows(tmp_path):
    # lengths of zeros beside rows would be refused (or crash the op: GeoTransformer's grid_subsampling);
    # one batch element holding every row is what such an op takes
    root = write_cpu_in_cuda_project(tmp_path / "neighbors", cuda=False)
    write_local_matrix(root / "matrix.yaml", compute="cpu")
    assert run_cli("adopt", str(root), "--force").returncode == 0
    assert run_cli("build", str(root), "--local", timeout=1200).returncode == 0
    tested = run_cli("test", str(root), "--json", timeout=1200)
    (variant,) = json.loads(tested.stdout)["variants"].values()
    assert variant["status"] == "passed" and variant["checks"] == {"ran": 3, "reference": 0}, variant
