"""mkdocs hooks: the reference sections rendered from publisher's catalogues (publisher/reference.py),
and the example kernel's benchmark figures served from where the benchmark writes them."""

from pathlib import Path

from mkdocs.structure.files import File

from publisher.reference import render

FIGURES = Path(__file__).resolve().parents[1] / "kernel_projects" / "rmsnorm" / "benchmarks"


def on_files(files, config):
    for name in ("rmsnorm.png", "rmsnorm-cpu.png"):
        files.append(File.generated(config, f"assets/{name}", abs_src_path=str(FIGURES / name)))
    return files


def on_page_markdown(markdown, page, config, files):
    return render(markdown)
