"""`publisher bench`: the project's benchmarks (kernels' Benchmark form) against each built
variant, results per device, and what the card shows of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from publisher.bench import runner
from publisher.bench.card import section, svg
from publisher.bench.stage import VariantBench, device_key, record

PUBLISHER = Path(sys.executable).parent / "publisher"


class _Kernel:
    @staticmethod
    def double(x):
        return x * 2

    @staticmethod
    def wrong(x):
        return x * 3


def _classes():
    from kernels.benchmark import Benchmark

    class Good(Benchmark):
        seed = 0

        def setup(self):
            self.x = torch.randn(64, 64)

        def benchmark_double(self):
            self.out = self.kernel.double(self.x)

        def verify_double(self):
            return self.x * 2

    class Bad(Good):
        def benchmark_double(self):
            self.out = self.kernel.wrong(self.x)

    class Broken(Good):
        def setup(self):
            raise RuntimeError("no such shape")

    return Good, Bad, Broken


def test_a_workload_is_timed_against_its_reference_on_rotated_inputs():
    good, bad, broken = _classes()
    [row] = runner.run_class(good, _Kernel(), "cpu", torch, warmup=1, iterations=5)
    assert row["verified"] is True and row["n"] == 5 and row["median_ms"] > 0 and row["reference_ms"] > 0
    assert row["copies"] > 1  # 16 KiB of inputs: rotated over copies, none found in a cache
    assert row["speedup"] == pytest.approx(row["reference_ms"] / row["median_ms"])


def test_a_wrong_output_or_a_raising_setup_is_reported_not_timed():
    _, bad, broken = _classes()
    [row] = runner.run_class(bad, _Kernel(), "cpu", torch, warmup=1, iterations=5)
    assert row["verified"] is False and "differs from the reference" in row["error"] and "median_ms" not in row
    [row] = runner.run_class(broken, _Kernel(), "cpu", torch, warmup=1, iterations=5)
    assert row["error"] == "RuntimeError: no such shape" and "median_ms" not in row


def _variant(build: Path, name: str, content: str) -> None:
    (build / name).mkdir(parents=True)
    (build / name / "metadata.json").write_text(content)


def test_results_are_kept_per_device_and_a_rebuilt_variant_loses_its_old_ones(tmp_path):
    build = tmp_path / "build"
    v = "torch213-cxx11-cpu-x86_64-linux"
    _variant(build, v, '{"a": 1}')
    row = {"benchmark": "B", "workload": "w", "median_ms": 2.0, "iqr_ms": 0.1, "reference_ms": 4.0, "speedup": 2.0,
           "verified": True, "n": 10}
    from publisher import state
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA L4"):
        record(build, VariantBench(v, "measured", device={"gpu": gpu, "torch": "2.11"}, rows=[row]),
               state.variant_fingerprint(build / v))
    assert sorted(p.name for p in (build / ".publisher" / "bench").glob("*.json")) == [
        "nvidia-h100-80gb-hbm3.json", "nvidia-l4.json"]
    lines, media = section(build, [v])
    text = "\n".join(lines)
    assert "### NVIDIA H100 80GB HBM3" in text and "### NVIDIA L4" in text and "| 2 | 0.1 | 4 | 2.00x | yes |" in text
    assert sorted(media) == ["benchmarks/publisher/nvidia-h100-80gb-hbm3.svg", "benchmarks/publisher/nvidia-l4.svg"]
    (build / v / "metadata.json").write_text('{"a": 2}')  # rebuilt: the results measured another build
    assert section(build, [v]) == ([], {})
    assert section(build, ["torch213-cxx11-cu130-x86_64-linux"]) == ([], {})


def test_the_plot_is_an_svg_with_a_bar_per_timing():
    text = svg([("v", {"benchmark": "B", "workload": "w<1>", "median_ms": 1.5, "reference_ms": 3.0})], "H100")
    assert text.startswith("<svg") and text.count("<rect") == 2 and "w&lt;1&gt;" in text
    assert device_key({"gpu": None, "platform": "x86_64-linux"}) == "cpu-x86-64-linux"


def test_bench_without_benchmarks_is_a_clear_error(tmp_path):
    project = tmp_path / "k"
    subprocess.run([str(PUBLISHER), "init", "publisher-test/no-bench", str(project), "--backends", "cpu"], check=True,
                   capture_output=True)
    for script in (project / "benchmarks").glob("*.py"):
        script.unlink()
    out = subprocess.run([str(PUBLISHER), "bench", str(project)], capture_output=True, text=True)
    assert out.returncode == 2 and "no benchmark*.py scripts" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_bench_measures_a_built_cpu_kernel_and_the_card_shows_it(tmp_path):
    project = tmp_path / "k"
    subprocess.run([str(PUBLISHER), "init", "publisher-test/silu-bench", str(project), "--backends", "cpu"], check=True,
                   capture_output=True)
    subprocess.run([str(PUBLISHER), "build", str(project), "--local"], check=True, capture_output=True)
    out = subprocess.run([str(PUBLISHER), "bench", str(project), "--iterations", "5", "--warmup", "1", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    [result] = json.loads(out.stdout)
    assert result["status"] == "measured" and {r["workload"] for r in result["rows"]} == {"float32", "bfloat16"}
    assert all(r["verified"] is True and r["n"] == 5 for r in result["rows"])
    files = list((project / "build" / ".publisher" / "bench").glob("*.json"))
    assert len(files) == 1 and "x86-64" in files[0].name
    lines, media = section(project / "build", [result["variant"]])
    assert "| SiluBenchBenchmark | float32 |" in "\n".join(lines) and len(media) == 1
