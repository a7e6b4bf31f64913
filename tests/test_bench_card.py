"""What the card shows of `publisher bench`'s results: per device a table (the
kernel's time next to the reference's and the speedup, a wrong output said so)
and a plot (an SVG, which goes to the Hub with the card), only for the
variants of the release as they are built now."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from huggingface_hub import HfApi

from publisher.bench.card import card_section
from publisher.bench.plot import device_svg
from publisher.bench.results import current_results, record
from publisher.project.load import require_project
from publisher.push.card import VariantRow, render

from bench_fixtures import write_benchmarks
from cli_helper import run_cli
from push_fixtures import repo_name
from test_bench_results import H100, L4, WORKLOAD, bench, variant

SOFTCAP = Path(__file__).resolve().parent.parent / "kernel_projects" / "softcap"
NAME = "torch-cpu"
ROWS = [VariantRow(NAME, "cpu", (), "passed (3 passed) on CPU (torch 2.15.0)")]
FAILED = {**WORKLOAD, "workload": "fp16", "status": "failed", "kernel": None, "reference": None, "speedup": None,
          "verify": {"match": False, "detail": "self.out differs from the reference by up to 0.5"}}
UNCHECKED = {**WORKLOAD, "workload": "fp32", "status": "unverified", "reference": None, "speedup": None}
METHOD = {"clock": "CUDA events on the launching stream", "sample_ms": 2.0, "cache_multiple": 4, "warmup": 10,
          "iterations": 100}


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "softcap"
    shutil.copytree(SOFTCAP, root, ignore=shutil.ignore_patterns("build", "__pycache__"))
    variant(root / "build", NAME)
    return root


def _measure(root: Path, device: dict = H100, workloads=(WORKLOAD, FAILED, UNCHECKED)) -> None:
    build = root / "build"
    record(build, bench(build, NAME, device, workloads=tuple(workloads), method=METHOD))


def test_each_device_gets_a_table_and_a_plot(tmp_path):
    root = _project(tmp_path)
    _measure(root)
    _measure(root, L4, (WORKLOAD,))
    section = card_section(root / "build", {NAME: root / "build" / NAME}, tmp_path / "media")
    assert sorted(section.media) == ["media/benchmark-nvidia-h100-80gb-hbm3.svg", "media/benchmark-nvidia-l4.svg"]
    text = section.markdown
    assert "### NVIDIA H100 80GB HBM3 (compute capability 9.0, 79.2 GiB)" in text and "### NVIDIA L4" in text
    assert "| `torch-cpu` | `RMSNorm.bf16` | 65.0 µs | 1.5 % | 101.0 µs | 1.55x | matches |" in text
    assert "| `torch-cpu` | `RMSNorm.fp16` | — | — | — | — | **differs**: self.out differs from the reference by up " \
           "to 0.5 |" in text
    assert "| `torch-cpu` | `RMSNorm.fp32` | 65.0 µs | 1.5 % | — | — | not checked (no verify method) |" in text
    assert "![Benchmarks on NVIDIA H100 80GB HBM3](media/benchmark-nvidia-h100-80gb-hbm3.svg)" in text
    assert "(torch 2.11.0+cu130, CUDA 13.0, driver 580.159.04): median of 100 samples per workload after 10 " \
           "warm-up calls, each sample at least 2.0 ms of calls launched one after another from Python, timed with " \
           "CUDA events on the launching stream, inputs rotated over copies spanning 5.1x the 50 MiB last-level " \
           "cache; kernel and reference take turns." in text


def test_results_from_a_remote_job_say_which_job(tmp_path):
    root = _project(tmp_path)
    _measure(root, {**H100, "place": "hf-jobs", "flavor": "h200", "job": "68f0c0ffee"})
    section = card_section(root / "build", {NAME: root / "build" / NAME}, tmp_path / "media")
    assert "Measured 2026-11-25 in hf-jobs job 68f0c0ffee (h200) with `publisher bench`." in section.markdown


def test_stale_results_are_not_on_the_card(tmp_path):
    root = _project(tmp_path)
    _measure(root)
    variant(root / "build", NAME, '{"rebuilt": 1}')
    assert card_section(root / "build", {NAME: root / "build" / NAME}, tmp_path / "media") is None


def test_the_plot_is_an_svg_with_a_bar_per_timed_workload(tmp_path):
    root = _project(tmp_path)
    _measure(root)
    (device,) = current_results(root / "build", {NAME: root / "build" / NAME})
    svg = ET.fromstring(device_svg(device))
    ns = "{http://www.w3.org/2000/svg}"
    assert svg.tag == f"{ns}svg"
    texts = [t.text for t in svg.iter(f"{ns}text")]
    assert texts[0] == "NVIDIA H100 80GB HBM3" and "1.55x  (65.0 µs vs 101.0 µs)" in texts
    assert "output differs from the reference" in texts and "no reference (verify_fp32 missing)" in texts
    bars = [r for r in svg.iter(f"{ns}rect") if r.get("fill") != "white"]
    assert len(bars) == 1


def test_a_generated_card_shows_the_results_and_uploads_the_plots(tmp_path):
    root = _project(tmp_path)
    _measure(root)
    section = card_section(root / "build", {NAME: root / "build" / NAME}, tmp_path / "media")
    card = render(require_project(root), "org/softcap", 1, ROWS, measured=section)
    assert "## Benchmarks\n\n### NVIDIA H100 80GB HBM3" in card.text
    assert card.media == {"media/benchmark-nvidia-h100-80gb-hbm3.svg": tmp_path / "media" / "benchmark-nvidia-h100-80gb-hbm3.svg"}


def test_a_template_shows_them_where_it_says_or_at_the_end(tmp_path):
    root = _project(tmp_path)
    _measure(root)
    section = card_section(root / "build", {NAME: root / "build" / NAME}, tmp_path / "media")
    (root / "CARD.md").write_text("# softcap\n\n## Speed\n\n{{ benchmarks }}\n\n## License\n\nMIT\n")
    text = render(require_project(root), "org/softcap", 1, ROWS, measured=section).text
    assert text.index("## Speed\n\n### NVIDIA H100") < text.index("## License")
    (root / "CARD.md").write_text("# softcap\n\nNo benchmarks here.\n")
    card = render(require_project(root), "org/softcap", 1, ROWS, measured=section)
    assert card.text.rstrip().endswith(section.markdown.rstrip()) and "## Benchmark results\n\n### NVIDIA" in card.text
    assert list(card.media) == ["media/benchmark-nvidia-h100-80gb-hbm3.svg"]


def test_push_puts_the_measured_results_and_their_plot_on_the_hub(hub_env, twice_project):
    write_benchmarks(twice_project, {"benchmark.py": '''\
import torch

from kernels.benchmark import Benchmark


class TwiceBenchmark(Benchmark):
    def setup(self):
        self.x = torch.randn(128, 128, device=self.device)

    def benchmark_small(self):
        self.out = self.kernel.twice(self.x)

    def verify_small(self):
        return self.x * 2
'''})
    benched = run_cli("bench", str(twice_project), "--variant", "torch-cpu", "--iterations", "3", "--json")
    assert benched.returncode == 0, benched.output
    key = json.loads(benched.stdout)["variants"]["torch-cpu"]["device_key"]
    repo = repo_name("twice")
    pushed = run_cli("push", repo, str(twice_project), "--allow-untested", "--partial", env=hub_env.env())
    assert pushed.returncode == 0, pushed.output

    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    on_main = set(api.list_repo_files(repo, repo_type="kernel", revision="main"))
    assert f"media/benchmark-{key}.svg" in on_main, on_main
    readme = open(api.hf_hub_download(repo, "README.md", repo_type="kernel", revision="main",
                                      local_dir=str(twice_project.parent / "dl"))).read()
    assert "![Benchmarks on " in readme and f"(media/benchmark-{key}.svg)" in readme
    assert "| `torch-cpu` | `TwiceBenchmark.small` |" in readme and "| matches |" in readme
    svg = api.hf_hub_download(repo, f"media/benchmark-{key}.svg", repo_type="kernel", revision="main",
                              local_dir=str(twice_project.parent / "dl"))
    assert open(svg).read().startswith("<svg ")
