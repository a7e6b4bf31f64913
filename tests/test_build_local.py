"""`publisher build --local` end to end on a tiny CPU project: the result
loads through the real `kernels` client, is cached, rebuilds incrementally,
and a failed or interrupted build never damages the previous variant."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from publisher import state
from publisher.builder.metadata import check_variant

from build_fixtures import write_noarch_project, write_tiny_project
from cli_helper import run_cli
from matrix_fixtures import local_cpu_variant_name

pytestmark = pytest.mark.slow

CPU_VARIANT = local_cpu_variant_name()
# Only the cpu variant: under a CUDA torch `--local` would also compile its CUDA flavour, which these tests do not need
LOCAL_CPU = ("--local", "--variant", "*-cpu-*")


def _json(result) -> dict:
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def _states(report: dict) -> dict[str, str]:
    return {v["variant"]: v["state"] for v in report["variants"]}


def _load_in_subprocess(build_dir: Path, code: str) -> str:
    """Import through kernels.get_local_kernel in a fresh interpreter (a
    variant's ops register once per process). backend="cpu": these tests build and run the cpu
    variant, which any torch flavour loads."""
    script = (
        "import torch\nfrom pathlib import Path\nfrom kernels import get_local_kernel\n"
        f"k = get_local_kernel(Path({str(build_dir)!r}), backend='cpu')\n" + code
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_local_build_loads_caches_and_rebuilds_incrementally(tmp_path):
    project = write_tiny_project(tmp_path / "tiny", git=True)
    build = project / "build"

    first = _json(run_cli("build", str(project), *LOCAL_CPU, "--json"))
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
    second = _json(run_cli("build", str(project), *LOCAL_CPU, "--json"))
    assert _states(second) == {CPU_VARIANT: "cached"}

    # One changed kernel source gives a new ops id (a hash of the inputs), so
    # that object and the binding (the one unit naming the ops id) recompile,
    # then the link; nothing else.
    scale = project / "scale_cpu" / "scale.cpp"
    scale.write_text(scale.read_text().replace("src[i] * factor", "factor * src[i]"))
    third = _json(run_cli("build", str(project), *LOCAL_CPU, "--json"))
    assert _states(third) == {CPU_VARIANT: "built"}
    log = Path(third["variants"][0]["log"]).read_text()
    compiled = sorted(line.rsplit("/", 1)[-1] for line in log.splitlines()
                      if line.startswith("[") and ("] CXX " in line or "] CC " in line))
    assert compiled == ["scale.cpp", "torch_binding.cpp"], compiled
    assert "] LINK " in log
    dirty = json.loads((variant / "metadata.json").read_text())
    assert dirty["provenance"]["kernel"]["dirty"] is True and dirty["id"] != meta.id

    # a failing compile: exit 1, first error shown, the previous variant untouched
    before = state.variant_fingerprint(variant)
    scale.write_text(scale.read_text() + "\nthis is not C++;\n")
    failed = run_cli("build", str(project), *LOCAL_CPU, "--json")
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert _states(report) == {CPU_VARIANT: "failed"}
    assert "error" in report["variants"][0]["error"]
    assert state.variant_fingerprint(variant) == before and check_variant(variant).ok
    assert not any(state.staging_dir(build).iterdir())

    # --only-failed after the fix rebuilds exactly that variant
    scale.write_text(scale.read_text().replace("\nthis is not C++;\n", ""))
    fixed = _json(run_cli("build", str(project), *LOCAL_CPU, "--only-failed", "--json"))
    assert _states(fixed) == {CPU_VARIANT: "built"}

    # Ctrl-C in the middle of a compile: exit 130, no partial variant, old one kept, no compilers left
    before = state.variant_fingerprint(variant)
    log_path = state.logs_dir(build) / f"{CPU_VARIANT}.log"
    log_path.unlink()  # wait for this build's own log, not the last one
    proc = subprocess.Popen([sys.executable, "-m", "publisher", "build", str(project), *LOCAL_CPU, "--force", "--debug"],
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


def test_commit_that_changes_no_build_input_recompiles_nothing(tmp_path):
    project = write_tiny_project(tmp_path / "tiny", git=True)
    first = _json(run_cli("build", str(project), *LOCAL_CPU, "--json"))
    assert _states(first) == {CPU_VARIANT: "built"}
    variant = project / "build" / CPU_VARIANT
    before = json.loads((variant / "metadata.json").read_text())

    (project / "tests").mkdir(exist_ok=True)
    (project / "tests" / "test_more.py").write_text("def test_nothing():\n    pass\n")
    (project / "README.md").write_text("# tiny\n")
    git = ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tests and docs only"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    second = _json(run_cli("build", str(project), *LOCAL_CPU, "--json"))
    assert _states(second) == {CPU_VARIANT: "built"}  # repackaged: its provenance names the new commit
    log = Path(second["variants"][0]["log"]).read_text()
    assert "ninja: no work to do." in log, log
    assert not [line for line in log.splitlines() if line.startswith("[")], "an object was recompiled or relinked"
    after = json.loads((variant / "metadata.json").read_text())
    assert after["id"] == before["id"]
    assert after["provenance"]["kernel"] == {"commit": commit, "dirty": False}
    out = _load_in_subprocess(project / "build", "print(k.scale(torch.arange(3, dtype=torch.float32), 2.0).tolist())")
    assert json.loads(out) == [0.0, 2.0, 4.0]


def test_builds_from_different_inputs_load_side_by_side(tmp_path):
    project = write_tiny_project(tmp_path / "tiny", git=True)
    assert _states(_json(run_cli("build", str(project), *LOCAL_CPU, "--json"))) == {CPU_VARIANT: "built"}
    first = tmp_path / "first"
    shutil.copytree(project / "build" / CPU_VARIANT, first / CPU_VARIANT)
    scale = project / "scale_cpu" / "scale.cpp"
    scale.write_text(scale.read_text().replace("src[i] * factor", "src[i] * factor * 2.0f"))
    assert _states(_json(run_cli("build", str(project), *LOCAL_CPU, "--json"))) == {CPU_VARIANT: "built"}

    ids = {json.loads((d / CPU_VARIANT / "metadata.json").read_text())["id"] for d in (first, project / "build")}
    assert len(ids) == 2
    script = (
        "import json, torch\nfrom pathlib import Path\nfrom kernels import get_local_kernel\n"
        f"a = get_local_kernel(Path({str(first)!r}), backend='cpu')\n"
        f"b = get_local_kernel(Path({str(project / 'build')!r}), backend='cpu')\n"
        "x = torch.ones(2)\nprint(json.dumps([a.scale(x, 3.0).tolist(), b.scale(x, 3.0).tolist()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[3.0, 3.0], [6.0, 6.0]]


def test_python_only_project_builds_noarch_variants(tmp_path):
    project = write_noarch_project(tmp_path / "noarch")
    report = _json(run_cli("build", str(project), "--local", "--json"))
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
    report = _json(run_cli("build", str(project), "--local", "--json", "--out", str(tmp_path / "build")))
    assert set(_states(report).values()) == {"built"}
    for entry in report["variants"]:
        assert check_variant(tmp_path / "build" / entry["variant"]).ok


@pytest.mark.skipif(not (Path(__file__).parents[1] / "kernel_projects" / "rmsnorm").is_dir(), reason="no example")
def test_rmsnorm_example_builds_and_computes(tmp_path):
    project = Path(__file__).parents[1] / "kernel_projects" / "rmsnorm"
    build = tmp_path / "build"
    report = _json(run_cli("build", str(project), *LOCAL_CPU, "--json", "--out", str(build)))
    assert _states(report) == {CPU_VARIANT: "built"}
    out = _load_in_subprocess(build, (
        "x = torch.randn(3, 37, dtype=torch.float32)\nw = torch.randn(37)\n"
        "ref = (x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()).float()\n"
        "got = k.rms_norm(x, w, 1e-6)\nprint(float((got - ref).abs().max()))"
    ))
    assert float(out) < 1e-4

