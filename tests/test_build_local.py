"""`publisher build --local` end to end on a tiny CPU project: the result
loads through the real `kernels` client, is cached, rebuilds incrementally,
and a failed or interrupted build never damages the previous variant."""

from __future__ import annotations

import importlib.metadata
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from build_fixtures import publisher, write_noarch_project, write_tiny_project
from publisher import state
from publisher.build.metadata import check_variant

pytestmark = pytest.mark.slow

TORCH_MINOR = "".join(torch.__version__.split("+")[0].split(".")[:2])
CPU_VARIANT = f"torch{TORCH_MINOR}-cxx11-cpu-x86_64-linux"


def _json(result) -> dict:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def _states(report: dict) -> dict[str, str]:
    return {v["variant"]: v["state"] for v in report["variants"]}


def _load_in_subprocess(build_dir: Path, code: str) -> str:
    """Import through kernels.get_local_kernel in a fresh interpreter (a
    variant's ops register once per process)."""
    script = (
        "import torch\nfrom pathlib import Path\nfrom kernels import get_local_kernel\n"
        f"k = get_local_kernel(Path({str(build_dir)!r}))\n" + code
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_local_build_loads_caches_and_rebuilds_incrementally(tmp_path):
    project = write_tiny_project(tmp_path / "tiny", git=True)
    build = project / "build"

    first = _json(publisher("build", str(project), "--local", "--json"))
    assert _states(first) == {CPU_VARIANT: "built"}
    entry = first["variants"][0]
    assert entry["abi"] == {"ok": True, "violations": []}, "the build must meet abi3 and manylinux_2_28"

    variant = build / CPU_VARIANT
    out = _load_in_subprocess(build, "x = torch.arange(6, dtype=torch.float32)\nprint(k.scale(x, 2.5).tolist())")
    assert json.loads(out) == [0.0, 2.5, 5.0, 7.5, 10.0, 12.5]

    # metadata.json as the client parses it, and the digest as the client checks it
    from kernels._rust import Digest, DigestAlgorithm, Metadata

    meta = Metadata.read_from_file(variant / "metadata.json")
    assert meta.name.python_name == "tiny_scale" and meta.id.startswith("_tiny_scale_cpu_")
    assert (variant / f"{meta.id}.abi3.so").is_file()
    meta.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, variant))
    raw = json.loads((variant / "metadata.json").read_text())
    commit = subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert raw["provenance"]["kernel"] == {"commit": commit.strip(), "dirty": False}
    assert raw["provenance"]["toolchain"]["torch"] == importlib.metadata.version("torch")
    dyn = subprocess.run(["readelf", "-d", str(variant / f"{meta.id}.abi3.so")], capture_output=True, text=True)
    assert "RPATH" not in dyn.stdout and "RUNPATH" not in dyn.stdout

    # unchanged inputs: cached, nothing compiled
    second = _json(publisher("build", str(project), "--local", "--json"))
    assert _states(second) == {CPU_VARIANT: "cached"}

    # The first edit makes the tree dirty: the ops id becomes <rev>_dirty and
    # everything recompiles. From then on, one changed source recompiles only
    # that object, then relinks.
    scale = project / "scale_cpu" / "scale.cpp"
    scale.write_text(scale.read_text().replace("src[i] * factor", "factor * src[i]"))
    assert _states(_json(publisher("build", str(project), "--local", "--json"))) == {CPU_VARIANT: "built"}
    scale.write_text(scale.read_text().replace("factor * src[i]", "factor * src[i] + 0.0f"))
    third = _json(publisher("build", str(project), "--local", "--json"))
    assert _states(third) == {CPU_VARIANT: "built"}
    log = Path(third["variants"][0]["log"]).read_text()
    compiled = [line for line in log.splitlines() if line.startswith("[") and ("] CXX " in line or "] CC " in line)]
    assert len(compiled) == 1 and compiled[0].endswith("scale_cpu/scale.cpp"), compiled
    assert "] LINK " in log
    dirty = json.loads((variant / "metadata.json").read_text())
    assert dirty["provenance"]["kernel"]["dirty"] is True and dirty["id"].endswith("_dirty")

    # a failing compile: exit 1, first error shown, the previous variant untouched
    before = state.variant_fingerprint(variant)
    scale.write_text(scale.read_text() + "\nthis is not C++;\n")
    failed = publisher("build", str(project), "--local", "--json")
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert _states(report) == {CPU_VARIANT: "failed"}
    assert "error" in report["variants"][0]["error"]
    assert state.variant_fingerprint(variant) == before and check_variant(variant).ok
    assert not any(state.staging_dir(build).iterdir())

    # --only-failed after the fix rebuilds exactly that variant
    scale.write_text(scale.read_text().replace("\nthis is not C++;\n", ""))
    fixed = _json(publisher("build", str(project), "--local", "--only-failed", "--json"))
    assert _states(fixed) == {CPU_VARIANT: "built"}

    # Ctrl-C in the middle of a compile: exit 130, no partial variant, old one kept, no compilers left
    before = state.variant_fingerprint(variant)
    log_path = state.logs_dir(build) / f"{CPU_VARIANT}.log"
    log_path.unlink()  # wait for this build's own log, not the last one
    proc = subprocess.Popen([sys.executable, "-m", "publisher", "build", str(project), "--local", "--force", "--debug"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "ninja -C" not in (log_path.read_text() if log_path.exists() else ""):
        time.sleep(0.1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert state.variant_fingerprint(variant) == before and check_variant(variant).ok
    assert not any(state.staging_dir(build).iterdir())
    leftovers = subprocess.run(["pgrep", "-f", str(project / "scale_cpu")], capture_output=True, text=True)
    assert leftovers.stdout.strip() == "", "compiler processes survived the interrupt"


def test_python_only_project_builds_noarch_variants(tmp_path):
    project = write_noarch_project(tmp_path / "noarch")
    report = _json(publisher("build", str(project), "--local", "--json"))
    assert _states(report) == {"torch-cpu": "built", "torch-cuda": "built"}
    from kernels._rust import Metadata

    for name in ("torch-cpu", "torch-cuda"):
        meta = Metadata.read_from_file(project / "build" / name / "metadata.json")
        assert meta.id == f"_tiny_noarch_{name.split('-')[1]}_" + meta.id.rsplit("_", 1)[1]
        assert check_variant(project / "build" / name).ok
    out = _load_in_subprocess(project / "build", "print(k.softsign(torch.tensor([1.0, -3.0])).tolist())")
    assert json.loads(out) == [0.5, -0.75]


@pytest.mark.skipif(not (Path(__file__).parents[1] / "kernel_projects" / "softcap").is_dir(), reason="no example")
def test_softcap_example_builds(tmp_path):
    project = Path(__file__).parents[1] / "kernel_projects" / "softcap"
    report = _json(publisher("build", str(project), "--local", "--json", "--out", str(tmp_path / "build")))
    assert set(_states(report).values()) == {"built"}
    for entry in report["variants"]:
        assert check_variant(tmp_path / "build" / entry["variant"]).ok


@pytest.mark.skipif(not (Path(__file__).parents[1] / "kernel_projects" / "rmsnorm").is_dir(), reason="no example")
def test_rmsnorm_example_builds_and_computes(tmp_path):
    project = Path(__file__).parents[1] / "kernel_projects" / "rmsnorm"
    build = tmp_path / "build"
    report = _json(publisher("build", str(project), "--local", "--json", "--out", str(build)))
    assert _states(report) == {CPU_VARIANT: "built"}
    out = _load_in_subprocess(build, (
        "x = torch.randn(3, 37, dtype=torch.float32)\nw = torch.randn(37)\n"
        "ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).float()\n"
        "got = k.rms_norm(x, w, 1e-6)\nprint(float((got - ref).abs().max()))"
    ))
    assert float(out) < 1e-4

