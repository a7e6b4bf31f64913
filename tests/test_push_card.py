"""The kernel card: functions and layers read statically, a project CARD.md
filled with upstream's template variables, the benchmark table and plot."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from publisher.consumer import Publisher
from publisher.project.load import require_project
from publisher.push.card import VariantRow, functions_and_layers, render

SOFTCAP = Path(__file__).resolve().parent.parent / "kernel_projects" / "softcap"
ROWS = [VariantRow("torch-cpu", "cpu", (), "passed (3 passed) on CPU (torch 2.12.0)")]


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "softcap"
    shutil.copytree(SOFTCAP, root, ignore=shutil.ignore_patterns("build", "__pycache__"))
    return root


def test_functions_and_layers_come_from_all(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "layers").mkdir(parents=True)
    (pkg / "__init__.py").write_text('from . import layers\n__all__ = [\n    "f",\n    "g",\n    "layers",\n]\n')
    (pkg / "layers" / "__init__.py").write_text("class A:\n    pass\n\n\nclass B(A):\n    pass\n")
    assert functions_and_layers(pkg) == (["f", "g"], ["A", "B"])
    (pkg / "__init__.py").write_text('__all__ = ["f"]\n')
    assert functions_and_layers(pkg) == (["f"], [])


def test_generated_card_has_usage_variants_and_benchmarks(tmp_path):
    root = _project(tmp_path)
    (root / "benchmarks").mkdir(exist_ok=True)
    (root / "benchmarks" / "results.json").write_text(json.dumps(
        {"device": "CPU", "results": [{"shape": "4x64", "kernel_ms": 0.012, "torch_ms": 0.03}]}))
    (root / "benchmarks" / "speed.png").write_bytes(b"\x89PNG\r\n")
    card = render(require_project(root), "org/softcap", 1, ROWS, publisher=Publisher.TRUSTED)
    text = card.text
    assert text.startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\ntags:\n")
    assert 'kernel = get_kernel("org/softcap", version=1)\n' in text and "- `softcap`" in text
    assert "| `torch-cpu` | cpu | - | any CPU | passed (3 passed) on CPU (torch 2.12.0) |" in text
    assert "| shape | kernel_ms | torch_ms |" in text and "| 4x64 | 0.012 | 0.03 |" in text
    assert "![speed](benchmarks/speed.png)" in text and card.media == {"benchmarks/speed.png": root / "benchmarks" / "speed.png"}


def test_card_template_is_filled_with_upstream_variables(tmp_path):
    root = _project(tmp_path)
    (root / "CARD.md").write_text(
        "---\nlibrary_name: kernels\n{% if license %}license: {{ license }}\n{% endif %}---\n\n"
        "Card of {{ repo_id }}.\n{% for func in functions %}\n- `{{ func }}`\n{% endfor %}\n"
        "{% if has_benchmark %}bench{% else %}No benchmark available yet.{% endif %}\n"
        "Version {{ version }}.\n"
    )
    text = render(require_project(root), "org/softcap", 3, ROWS).text
    assert text.startswith("---\nlibrary_name: kernels\nlicense: apache-2.0\n---\n")
    assert "Card of org/softcap." in text and "- `softcap`" in text and "Version 3." in text
    assert "{{" not in text and "{%" not in text


def test_a_template_without_variants_still_gets_the_table_of_gpus_each_variant_loads_on(tmp_path):
    # rmsnorm's own CARD.md names no variants: the card must still say which GPUs kernels loads each on
    root = _project(tmp_path)
    (root / "CARD.md").write_text("---\nlibrary_name: kernels\n---\n\nCard of {{ repo_id }}.\n")
    rows = [*ROWS, VariantRow("torch211-cxx11-cu130-x86_64-linux", "cuda", ("8.0",), "not tested")]
    text = render(require_project(root), "org/softcap", 1, rows).text
    assert "## Variants" in text
    row = next(line for line in text.splitlines() if line.startswith("| `torch211-cxx11-cu130"))
    loads, _, refused = row.split(" | ")[3].partition(" (not ")
    assert "A100" in loads and "H100" not in loads and "H100/H200" in refused  # 8.0 only: kernels refuses 9.0


def test_a_template_places_the_variants_table_itself_and_gets_it_once(tmp_path):
    root = _project(tmp_path)
    (root / "CARD.md").write_text("---\nlibrary_name: kernels\n---\n\n## Where it runs\n\n{{ variants_table }}\n")
    text = render(require_project(root), "org/softcap", 1, ROWS).text
    assert text.count("| `torch-cpu` | cpu | - | any CPU |") == 1 and "## Variants" not in text
