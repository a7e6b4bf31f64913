"""Which torch can test which variant (the `kernels` resolution rules, any
backend kernels lets that torch select), and the running interpreter testing a
CPU variant whatever its torch flavour."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from publisher.plan.variants import Variant
from publisher.testing.environment import can_load
from publisher.toolchains.probe import probe

from cli_helper import run_cli
from push_fixtures import write_scale
from smoke_fixtures import write_broken, write_noarch

HOST = "x86_64-linux"
CPU_212 = {"torch_version": "2.12.0+cpu", "cuda": None, "hip": None, "xpu": None, "cxx11_abi": True}
CU130_211 = {"torch_version": "2.11.0", "cuda": "13.0", "hip": None, "xpu": None, "cxx11_abi": True}


@pytest.mark.parametrize("variant, torch, expected", [
    ("torch212-cxx11-cpu-x86_64-linux", CPU_212, True),
    ("torch210-cxx11-cpu-x86_64-linux", CPU_212, False),  # another torch minor
    ("torch212-cxx11-cpu-aarch64-linux", CPU_212, False),  # another platform
    ("torch212-cxx11-cu130-x86_64-linux", CPU_212, False),  # a CPU torch cannot load CUDA code
    ("torch211-cxx11-cu130-x86_64-linux", CU130_211, True),
    ("torch211-cxx11-cu128-x86_64-linux", CU130_211, False),  # CUDA major differs
    ("torch211-cxx11-cpu-x86_64-linux", CU130_211, True),  # a CUDA torch runs CPU code (backend="cpu")
    ("torch212-cxx11-cpu-x86_64-linux", CU130_211, False),  # ... of its own torch minor only
    ("torch211-cxx11-cpu-x86_64-linux", dict(CU130_211, cxx11_abi=False), False),  # ... and C++ ABI
    ("torch211-cxx11-cpu-x86_64-linux", dict(CU130_211, cxx11_abi=None), False),  # ABI unknown: not assumed
    ("torch-stable-abi210-cu130-x86_64-linux", CU130_211, True),  # stable ABI: any newer torch
    ("torch-stable-abi212-cu130-x86_64-linux", CU130_211, False),
    ("torch-cpu", CPU_212, True),
    ("torch-cuda", CPU_212, False),
    ("torch-cpu", CU130_211, True),  # noarch CPU code runs on a CUDA torch
    ("torch-cuda", CU130_211, True),
    ("torch-universal", CU130_211, True),
])
def test_can_load(variant, torch, expected):
    assert can_load(Variant.parse(variant), torch, HOST) is expected


def test_cuda_minor_of_the_variant_may_be_older():
    cu132 = dict(CU130_211, cuda="13.2")
    assert can_load(Variant.parse("torch211-cxx11-cu130-x86_64-linux"), cu132, HOST)
    assert not can_load(Variant.parse("torch211-cxx11-cu132-x86_64-linux"), CU130_211, HOST)


def test_no_torch_loads_nothing():
    assert not can_load(Variant.parse("torch-cpu"), {"error": "torch is not installed"}, HOST)


def test_probe_reads_the_cxx11_abi_of_the_installed_torch():
    import torch

    assert probe()["cxx11_abi"] is torch.compiled_with_cxx11_abi()


def test_cpu_variant_is_tested_by_the_running_torch_whatever_its_flavour(tmp_path):
    """The noarch torch-cpu variant is tested by the interpreter running
    publisher, whichever torch it has (PyPI's CUDA wheel as well as a CPU one):
    nothing is downloaded, and the project's own `get_kernel(repo)`, which
    names no backend, loads the variant under test."""
    import torch

    root = tmp_path / "scale"
    write_scale(root)
    built = run_cli("build", "--local", str(root), "--json", process=True)
    assert built.returncode == 0, built.stdout + built.stderr
    result = run_cli("test", "--variant", "torch-cpu", str(root), "--json", process=True)
    assert result.returncode == 0, result.stdout + result.stderr
    entry = json.loads(result.stdout)["variants"]["torch-cpu"]
    assert entry["status"] == "passed" and entry["tests"]["passed"] == 1, entry
    assert entry["device"]["torch"] == torch.__version__ and entry["device"]["cuda"] == torch.version.cuda
    assert Path(entry["log"]).read_text().splitlines()[0] == (
        f"# publisher test torch-cpu with {sys.executable} "
        f"(this interpreter (torch {importlib.metadata.version('torch')}))"
    )


def test_unreachable_index_is_one_line_naming_the_variant_and_the_index(tmp_path):
    """A variant no torch here can load (another torch minor) needs its
    environment from the cell's index; that index cannot be reached: the
    variant's error says so in one line, no traceback."""
    import torch

    from publisher.plan.planner import host_platform

    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    other, host, index = f"{major}.{minor - 1}", host_platform(), "http://127.0.0.1:9/simple"
    name = f"torch{major}{minor - 1}-cxx11-cpu-{host}"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"schema: 1\nindexes:\n  offline: {index}\ntorch:\n  - version: \"{other}\"\n"
                      f"    flavours:\n      - {{compute: cpu, platforms: [{host}], source: offline}}\n")
    project = write_broken(tmp_path / "broken", tests=False)
    # The variant's files: any complete build folder (this test never gets to load it).
    halve = write_noarch(tmp_path / "halve")
    built = run_cli("build", "--local", str(halve), "--json", process=True)
    assert built.returncode == 0, built.stdout + built.stderr
    shutil.copytree(halve / "build" / "torch-cpu", project / "build" / name)

    env = dict(os.environ, PUBLISHER_CACHE_DIR=str(tmp_path / "cache"))
    result = run_cli("test", str(project), "--matrix", str(matrix), "--variant", name, "--json", env=env, process=True)
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    entry = json.loads(result.stdout)["variants"][name]
    assert entry["status"] == "error"
    assert "\n" not in entry["reason"] and name in entry["reason"], entry["reason"]
    assert f"the package index {index} is unreachable" in entry["reason"], entry["reason"]
