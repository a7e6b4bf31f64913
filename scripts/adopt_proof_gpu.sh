#!/usr/bin/env bash
# Developer script: proof of `publisher adopt` on real extension projects, on the GPU machine.
# It runs from a bundle folder (copied there as .adopt-bundle/run.sh) that holds, per project,
# projects/NAME/{original,adopted,inputs.py} (the project as published, its adoption made on the CPU
# machine, scripts/adopt_equivalence.py's inputs), code/ (a `git archive` of publisher/, scripts/,
# matrices/ at the commit under test), code-start/ and projects/NAME/start-adopted (the same at the
# commit compared with), and whl/ (the wheels the GPU machine lacks). BENCHMARKS.md lists the projects.
# From the repository root:
#
#   bash .adopt-bundle/run.sh 1              part 1 (torch-scatter, roi-align, extension-cpp, chamfer3d, inline-square, knn-cuda)
#   bash .adopt-bundle/run.sh 2              part 2 (pt-mcc, maskrcnn, pointnet2, graspnet-knn, geotransformer; then the
#                                         start commit's adoptions of the five that adopted there)
#   bash .adopt-bundle/run.sh 4              part 4 (extension-cpp, graspnet-knn, maskrcnn: their cpu and cuda variants,
#                                         matrices/gpu-runner-torch211-cpu-cu130.yaml; the cpu one also compared on CPU)
#   bash .adopt-bundle/run.sh 1 --dry-run    any machine, no GPU: installs the wheels, checks every path, input file,
#                                         import and command, and runs `publisher check` on each adopted copy
#
# Each part ends within BUDGET seconds (default 500, the wheel install and the files written after it aside):
# what would start past it is a row that says so. For each project of the part (adopted on the CPU machine with
# the final code of branch validate-33, which .adopt-bundle/code holds):
#   1. `publisher build --local --matrix matrices/gpu-runner-torch211-cu130.yaml`, for this GPU's capability only,
#      beside the ORIGINAL built its own way (its setup.py or its load() call; scripts/adopt_equivalence.py)
#   2. `publisher test --json`
#   3. every op of the adopted build and of the original called on the same inputs (projects/NAME/inputs.py):
#      max abs difference of every output and every argument written to; where the original no longer builds
#      (THC), the project's REFERENCE instead
# Part 2 then builds and tests the start commit's (a54bb99) adoption of the five projects it adopted, with its
# own code (.adopt-bundle/code-start), for the verdict before.
# $OUT gets part<P>.json (every result), part<P>-logs.zip (every log) and part<P>.txt (the table, printed last).
set -uo pipefail
PART="${1:?usage: bash .adopt-bundle/run.sh 1|2 [--dry-run]}"
MODE="${2:-run}"
BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PY:-python3}"
OUT="${OUT:-/tmp/adopt-proof-out}"
SITE="${SITE:-/tmp/adopt-proof-site}"
mkdir -p "$OUT"
rm -rf "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$BUNDLE"/whl/*.whl \
  || { echo "the wheels of $BUNDLE/whl did not install"; exit 1; }
export PYTHONPATH="$SITE" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
exec "$PY" - "$PART" "$MODE" "$BUNDLE" "$OUT" <<'PY'
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

STARTED = time.monotonic()
PART, MODE, BUNDLE, OUT = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
DRY = MODE == "--dry-run"
BUDGET = float(os.environ.get("BUDGET", "500"))
DEADLINE = STARTED + BUDGET
CODE, CODE_START = BUNDLE / "code", BUNDLE / "code-start"
# FAKE_CPU=1 (a rehearsal of the whole flow on a machine without a GPU): the cpu variants, compared on the CPU
FAKE_CPU = os.environ.get("FAKE_CPU") == "1"
MATRIX = CODE / "matrices" / ("cpu-2.13.yaml" if FAKE_CPU else "gpu-runner-torch211-cu130.yaml")
VARIANT = "*-cpu-*" if FAKE_CPU else "*-cu130-*"  # the CUDA variant only: the CPU machine built and tested the cpu ones
PY = sys.executable
SITE = os.environ["PYTHONPATH"]
PARTS = {
    "1": ["torch-scatter", "roi-align", "extension-cpp", "chamfer3d", "inline-square", "knn-cuda"],
    "2": ["pt-mcc", "maskrcnn", "pointnet2", "graspnet-knn", "geotransformer"],
    # after the fixes part 1 and 2 called for: the projects they touch, torch-scatter without its original
    # (468 s to build; compared op by op with its original on the CPU machine instead)
    "3": ["torch-scatter", "roi-align", "geotransformer", "maskrcnn"],
    # CPU + CUDA projects whose setup.py builds without CUDA too (PA108): both variants, each tested, the cpu one
    # compared with the original on CPU tensors as well
    "4": ["extension-cpp", "graspnet-knn", "maskrcnn"],
}
BOTH = PART == "4"  # the cpu variant too
NO_ORIGINAL = set(filter(None, os.environ.get("NO_ORIGINAL", "torch-scatter" if PART == "3" else "").split(",")))
START = {"2": ["inline-square", "graspnet-knn", "pointnet2", "geotransformer", "knn-cuda"]}
WORKERS = int(os.environ.get("WORKERS", "3"))
CORES = max(2, (os.cpu_count() or 16) // WORKERS)
WORK = Path(os.environ.get("WORK", "/tmp/adopt-proof-work")) / f"part{PART}"
LOGS = WORK / "logs"
if PART not in PARTS:
    sys.exit(f"PART is 1, 2, 3 or 4, not {PART!r}")
if BOTH and not FAKE_CPU:
    MATRIX, VARIANT = CODE / "matrices" / "gpu-runner-torch211-cpu-cu130.yaml", "*"
if os.environ.get("ONLY"):  # ONLY=name,name: those projects of the part
    PARTS[PART] = [n for n in PARTS[PART] if n in os.environ["ONLY"].split(",")]
    START[PART] = [n for n in START.get(PART, []) if f"{n}-start" in os.environ["ONLY"].split(",")]
sys.path.insert(0, str(CODE / "scripts"))
sys.path.insert(0, str(CODE))
import adopt_equivalence as ae  # noqa: E402 - the carried code's

_print_lock = threading.Lock()


def say(*parts):
    with _print_lock:
        print(f"[{time.monotonic() - STARTED:5.0f}s]", *parts, flush=True)


def left(reserve=0.0):
    return DEADLINE - time.monotonic() - reserve


def env_for(code):
    return {**os.environ, "PYTHONPATH": os.pathsep.join([SITE, str(code)]), "MAX_JOBS": str(CORES)}


def run(cmd, log, code=CODE, cwd=None, timeout=None, env=None, stdout=None):
    """A command with its output in LOGS/log (stdout to `stdout` when given); (rc, seconds). rc 124: out of time."""
    timeout = left(10) if timeout is None else min(timeout, left(10))
    if timeout <= 5:
        return 124, 0.0
    began = time.monotonic()
    LOGS.mkdir(parents=True, exist_ok=True)
    with (LOGS / log).open("a") as fh:
        fh.write(f"$ {' '.join(map(str, cmd))}\n")
        fh.flush()
        out = open(stdout, "w") if stdout else fh
        try:
            rc = subprocess.run(list(map(str, cmd)), cwd=cwd, env=env or env_for(code), stdout=out, stderr=fh,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            fh.write(f"\n[run.sh] stopped after {timeout:.0f} s: the part's time budget\n")
        finally:
            if stdout:
                out.close()
    return rc, time.monotonic() - began


def narrow(toml, arch):
    import tomlkit

    doc = tomlkit.parse(toml.read_text())
    for kernel in (doc.get("kernel") or {}).values():
        if kernel.get("backend") == "cuda":
            kernel["cuda-capabilities"] = [arch]
    toml.write_text(tomlkit.dumps(doc))


def test_summary(path):
    """The verdict of each variant tested; status: the worst of them (failed, error, untested, then passed)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        return {"status": "no result", "reason": f"{type(err).__name__}: {err}"[:300]}
    variants = {name: {"status": v.get("status"), "tests": v.get("tests"), "suite": v.get("suite"),
                       "checks": v.get("checks"), "reason": (v.get("reason") or "")[:600],
                       "fix": (v.get("fix") or "")[:300], "device": (v.get("device") or {}).get("gpu")}
                for name, v in (data.get("variants") or {}).items()}
    if not variants:
        return {"status": "no variant tested"}
    rank = ["failed", "error", "untested", "loaded-not-run", "passed"]
    worst = min(variants.values(), key=lambda v: rank.index(v["status"]) if v["status"] in rank else 0)
    return {**worst, "variants": variants}


COMPARE = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import adopt_equivalence as ae
project, work, original, adopted, device = sys.argv[2:7]
built = {"inputs": ae._load_inputs(Path(project) / "inputs.py"), "work": Path(work), "adopted": Path(adopted)}
if len(sys.argv) > 7:  # the cpu variant, on CPU tensors
    built["inputs"].DEVICES, built["inputs"].BACKEND = ["cpu"], "cpu"
original = json.loads(original)
if original is not None:
    original = {k: Path(v) if k in ("root", "build_dir") else v for k, v in original.items()}
built["original"] = original
rows = ae._compare_project(Path(project), built, device)
print("ROWS " + json.dumps(rows))
"""


def compare(name, project, work, original, device, cpu_variant=False):
    """Every op of both builds on the same inputs, in a process of its own (a crash there is this project's row);
    `cpu_variant`: the adopted cpu variant, on CPU tensors."""
    tag = f"{name}{'.cpu' if cpu_variant else ''}"
    rc, seconds = run([PY, "-c", COMPARE, CODE / "scripts", project, work, json.dumps(original, default=str),
                       work / "adopted", device, *(["cpu-variant"] if cpu_variant else [])],
                      f"{tag}.compare.log", timeout=150, stdout=LOGS / f"{tag}.compare.out")
    text = (LOGS / f"{tag}.compare.out").read_text(errors="replace") if (LOGS / f"{tag}.compare.out").is_file() else ""
    rows = next((json.loads(line[5:]) for line in text.splitlines() if line.startswith("ROWS ")), None)
    if rows is None:
        tail = (LOGS / f"{tag}.compare.log").read_text(errors="replace").strip().splitlines()[-3:]
        return [{"op": "-", "result": f"error: the comparison ended with exit {rc}: {' | '.join(tail)}"[:400]}]
    if cpu_variant:
        rows = [{**r, "op": f"{r.get('op')} (cpu variant)"} for r in rows]
    return rows


def original_build(name, project, work, inputs, env):
    if name in NO_ORIGINAL:
        return None, "not built (NO_ORIGINAL)"
    try:
        built = ae._build_original(work / "original", work, LOGS, name, {**env, **getattr(inputs, "ORIGINAL_ENV", {})},
                                   DEADLINE - 10)
        return built, "built"
    except Exception as err:  # noqa: BLE001 - a row
        return None, f"did not build: {str(err).strip().splitlines()[-1][:200] if str(err).strip() else type(err).__name__}"


def project_row(name, arch, device):
    project = BUNDLE / "projects" / name
    row = {"project": name}
    if left(60) <= 0:
        row["skipped"] = "the part's time budget was spent before it started"
        return row
    work = WORK / name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(project / "adopted", work / "adopted")
    shutil.copytree(project / "original", work / "original")
    if arch:
        narrow(work / "adopted" / "build.toml", arch)
    inputs = ae._load_inputs(project / "inputs.py")
    env = {**env_for(CODE), "TORCH_CUDA_ARCH_LIST": arch or ""}
    say(f"{name}: building the adopted copy and the original ({CORES} cores each)")
    with ThreadPoolExecutor(max_workers=2) as pool:
        orig = pool.submit(original_build, name, project, work, inputs, env)
        rc, seconds = run([PY, "-m", "publisher", "build", work / "adopted", "--local", "--matrix", MATRIX,
                           "--variant", VARIANT, "--no-hub-cache", "--cores", CORES], f"{name}.build.log")
        original, row["original"] = orig.result()
    row["build"] = {"rc": rc, "seconds": round(seconds)}
    say(f"{name}: adopted build exit {rc} ({seconds:.0f} s); original {row['original']}")
    if rc != 0:
        return row
    trc, tsec = run([PY, "-m", "publisher", "test", work / "adopted", "--json", "--matrix", MATRIX, "--variant",
                     VARIANT, "--timeout",
                     str(int(max(30, min(240, left(40)))))], f"{name}.test.log", timeout=260,
                    stdout=LOGS / f"{name}.test.json")
    for log in (work / "adopted" / "build" / ".publisher" / "logs").glob("*.test.log"):
        shutil.copy(log, LOGS / f"{name}.{log.name}")
    row["test"] = {"rc": trc, "seconds": round(tsec), **test_summary(LOGS / f"{name}.test.json")}
    say(f"{name}: test {row['test'].get('status')} {row['test'].get('tests')}")
    if original is None and not hasattr(inputs, "REFERENCE"):
        row["equivalence"] = [{"op": "-", "result": f"not compared: the original {row['original']}"}]
        return row
    row["equivalence"] = compare(name, project, work, original, device)
    if BOTH:
        row["equivalence"] += compare(name, project, work, original, device, cpu_variant=True)
    return row


def start_row(name, arch):
    """The start commit's adoption, built and tested with the start commit's code: the verdict before."""
    row = {"project": f"{name} (start)"}
    adopted = BUNDLE / "projects" / name / "start-adopted"
    if left(60) <= 0:
        row["skipped"] = "the part's time budget was spent before it started"
        return row
    work = WORK / f"{name}-start"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(adopted, work)
    if arch:
        narrow(work / "build.toml", arch)
    rc, seconds = run([PY, "-m", "publisher", "build", work, "--local", "--matrix", CODE_START / "matrices" /
                       MATRIX.name, "--variant", VARIANT, "--no-hub-cache", "--cores", CORES],
                      f"{name}.start.build.log", code=CODE_START)
    row["build"] = {"rc": rc, "seconds": round(seconds)}
    if rc == 0:
        trc, tsec = run([PY, "-m", "publisher", "test", work, "--json", "--matrix", CODE_START / "matrices" /
                         MATRIX.name, "--variant", VARIANT, "--timeout", "120"],
                        f"{name}.start.test.log",
                        code=CODE_START, timeout=150, stdout=LOGS / f"{name}.start.test.json")
        row["test"] = {"rc": trc, "seconds": round(tsec), **test_summary(LOGS / f"{name}.start.test.json")}
    say(f"{name} (start): build exit {rc}; test {(row.get('test') or {}).get('status')}")
    return row


def dry_run():
    """No GPU needed: everything the run reads is there, imports, and the adopted copies pass check."""
    problems = []
    for tool in ("nvcc", "ninja"):
        say(f"{tool}: {shutil.which(tool) or 'NOT ON PATH (the GPU machine has it)'}")
    starts = (CODE_START / "publisher", CODE_START / "matrices" / MATRIX.name) if START.get(PART) else ()
    for path in (CODE / "publisher", CODE / "scripts" / "adopt_equivalence.py", MATRIX, *starts):
        if not path.exists():
            problems.append(f"missing {path}")
    for module in ("kernels", "huggingface_hub", "tomlkit", "kernel_abi_check", "expecttest", "pytest", "torch"):
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        say(f"import {module}: {getattr(found, 'origin', None) or 'MISSING'}")
        if found is None:
            problems.append(f"cannot import {module}")
    names = PARTS[PART] + START.get(PART, [])
    for name in PARTS[PART]:
        project = BUNDLE / "projects" / name
        for need in ("adopted/build.toml", "original", "inputs.py"):
            if not (project / need).exists():
                problems.append(f"{name}: missing {need}")
        try:
            inputs = ae._load_inputs(project / "inputs.py")
            say(f"{name}: inputs for {', '.join(inputs.INPUTS)}; devices {getattr(inputs, 'DEVICES', None) or getattr(inputs, 'DEVICE', 'cuda')}")
        except Exception as err:  # noqa: BLE001
            problems.append(f"{name}: inputs.py: {type(err).__name__}: {err}")
        for built in ("build", "__pycache__"):
            if list((project / "adopted").glob(built)):
                problems.append(f"{name}: adopted/{built} travelled")
    for name in START.get(PART, []):
        if not (BUNDLE / "projects" / name / "start-adopted" / "build.toml").is_file():
            problems.append(f"{name}: missing start-adopted/build.toml")
    for name, code, sub in [(n, CODE, "adopted") for n in PARTS[PART]] + \
                           [(n, CODE_START, "start-adopted") for n in START.get(PART, [])]:
        work = WORK / f"check-{name}-{sub}"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(BUNDLE / "projects" / name / sub, work)
        narrow(work / "build.toml", "9.0")
        rc, _ = run([PY, "-m", "publisher", "check", work], f"{name}.{sub}.check.log", code=code, timeout=120)
        rc2, _ = run([PY, "-m", "publisher", "matrix", work, "--matrix", code / "matrices" / MATRIX.name],
                     f"{name}.{sub}.matrix.log", code=code, timeout=120)
        say(f"{name} [{sub}]: publisher check exit {rc}; publisher matrix exit {rc2}")
        if rc or rc2:
            problems.append(f"{name} [{sub}]: publisher check/matrix exit {rc}/{rc2} (see {LOGS}/{name}.{sub}.*.log)")
    say(f"would run, {WORKERS} at a time, {CORES} cores each: " + ", ".join(names))
    for p in problems:
        say("PROBLEM:", p)
    say("dry run: " + ("everything is in place" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def table(rows):
    lines = [f"{'project':<24} {'build':<10} {'verdict':<10} {'pass/fail/skip':<15} {'equivalence':<44} original",
             "-" * 120]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"{r['project']:<24} {'-':<10} {'-':<10} {'-':<15} {'-':<44} skipped: {r['skipped']}")
            continue
        b = r.get("build") or {}
        build = f"{'ok' if b.get('rc') == 0 else 'TIMEOUT' if b.get('rc') == 124 else 'FAILED'} {b.get('seconds', 0)}s"
        t = r.get("test") or {}
        n = t.get("tests") or {}
        counts = f"{n.get('passed', '-')}/{n.get('failed', '-')}/{n.get('skipped', '-')}" if n else "-"
        eq = r.get("equivalence") or []
        if eq:
            kinds = {}
            for e in eq:
                kinds[e["result"].split(":")[0]] = kinds.get(e["result"].split(":")[0], 0) + 1
            worst = max((e.get("max_abs", 0.0) for e in eq), default=0.0)
            vs = " vs REF" if any("REFERENCE" in e.get("op", "") for e in eq) else ""
            eqs = " ".join(f"{k}={v}" for k, v in sorted(kinds.items())) + f" max|d|={worst:.2e}{vs}"
        else:
            eqs = "-"
        lines.append(f"{r['project']:<24} {build:<10} {str(t.get('status', '-')):<10} {counts:<15} {eqs[:44]:<44} "
                     f"{r.get('original', '-')}"[:200])
    return "\n".join(lines)


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    if DRY:
        return dry_run()
    import torch

    if FAKE_CPU:
        arch, device = None, "cpu"
        say(f"FAKE_CPU: a rehearsal on torch {torch.__version__}, the cpu variants (CUDA comparisons fail here)")
    elif not torch.cuda.is_available():
        say("no CUDA device: run this on the GPU machine (or pass --dry-run, or FAKE_CPU=1 for a rehearsal)")
        return 2
    else:
        major, minor = torch.cuda.get_device_capability()
        arch, device = f"{major}.{minor}", "cuda"
        say(f"torch {torch.__version__} CUDA {torch.version.cuda} on {torch.cuda.get_device_name()} (sm {arch}); "
            f"{os.cpu_count()} cores, {WORKERS} projects at a time; budget {BUDGET:.0f} s")
    rows = []
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = [pool.submit(project_row, name, arch, device) for name in PARTS[PART]]
        futures += [pool.submit(start_row, name, arch) for name in START.get(PART, [])]
        for name, future in zip(PARTS[PART] + [f"{n} (start)" for n in START.get(PART, [])], futures):
            try:
                rows.append(future.result())
            except Exception as err:  # noqa: BLE001 - one project's failure is a row
                traceback.print_exc()
                rows.append({"project": name, "error": f"{type(err).__name__}: {err}"[:400]})
    (OUT / f"part{PART}.json").write_text(json.dumps({"torch": torch.__version__, "arch": arch, "rows": rows},
                                                     indent=1, default=str))
    with zipfile.ZipFile(OUT / f"part{PART}-logs.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for log in sorted(LOGS.glob("*")):
            if log.is_file() and log.stat().st_size < 20_000_000:
                zf.write(log, log.name)
    text = table(rows)
    (OUT / f"part{PART}.txt").write_text(text + "\n")
    for r in rows:  # the reasons, short, before the table
        t = r.get("test") or {}
        if t.get("status") not in (None, "passed") or r.get("error"):
            print(f"{r['project']}: {r.get('error') or t.get('reason', '')[:300]}" + (f" | fix: {t['fix'][:160]}" if t.get("fix") else ""))
        for e in r.get("equivalence") or []:
            if e["result"] not in ("identical", "close"):
                print(f"{r['project']}: {e['op']}: {e['result'][:200]}")
    print(f"\npart {PART}: {time.monotonic() - STARTED:.0f} s\n{text}", flush=True)
    return 0


sys.exit(main())
PY
