"""On a GPU machine, in one call: `publisher bench` on a variant already built
elsewhere (nothing is built here), as a remote job runs it (`--json`), then
the table. Uses what `scripts/gpu_test.sh prepare` leaves in .gpu-bundle/
on the CPU machine: the GPU runner's variant of kernel_projects/rmsnorm
(build/<variant>/), the project's path, and the wheels the GPU machine lacks.

    # on the CPU machine, once:   bash scripts/gpu_test.sh prepare
    # on the GPU machine:         python3 scripts/device_bench.py [publisher bench options...]
    #   (with .gpu-bundle/ copied beside the repository on the GPU machine: python3 scripts/device_bench.py)

Into $OUT (default /tmp/device-bench-out): bench.json (the --json answer),
bench.txt (the table), the device's results file and plot
(build/.publisher/bench/<device-key>.json and .svg) and the bench log.
Exit status: publisher bench's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / ".gpu-bundle"
SITE = Path(os.environ.get("SITE", "/tmp/publisher-site"))


def fail(message: str) -> int:
    print(f"device_bench: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    out = Path(os.environ.get("OUT") or "/tmp/device-bench-out")
    out.mkdir(parents=True, exist_ok=True)
    build = BUNDLE / "build"
    if not (BUNDLE / "project").is_file() or not build.is_dir() or not any(build.glob("*/metadata.json")):
        return fail(f"{BUNDLE} holds no built variant: run `bash scripts/gpu_test.sh prepare` on the CPU machine first, "
                    "and copy .gpu-bundle/ to this one")
    project = ROOT / (BUNDLE / "project").read_text().strip()
    wheels = sorted((BUNDLE / "whl").glob("*.whl"))
    if wheels:  # the kernels client (and tomlkit), which the GPU machine's Python lacks
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", str(SITE), *map(str, wheels)], check=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(SITE), str(ROOT)] + ([os.environ["PYTHONPATH"]]
                                                                    if os.environ.get("PYTHONPATH") else [])))
    smi = shutil.which("nvidia-smi")
    if smi:
        subprocess.run([smi, "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu", "--format=csv"],
                       env=env, check=False)
    command = [sys.executable, "-m", "publisher", "bench", str(project), "--build-dir", str(build), "--json", *argv]
    print("$ " + " ".join(command), flush=True)
    done = subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    (out / "bench.json").write_text(done.stdout)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        print(done.stdout)
        return fail(f"publisher bench gave no JSON (exit {done.returncode}); its output is above")
    sys.path[:0] = [str(SITE), str(ROOT)]
    from publisher.bench.results import VariantBench
    from publisher.bench.table import render_table

    if "variants" not in report:  # the command stopped: {"ok": false, "error": {...}}
        print(json.dumps(report, indent=1))
        return done.returncode
    table = render_table([VariantBench.from_report(name, entry) for name, entry in report["variants"].items()])
    print(table)
    (out / "bench.txt").write_text(table + "\n")
    for path in [*report.get("files", []), *report.get("plots", [])]:
        if Path(path).is_file():
            shutil.copy(path, out / Path(path).name)
    for log in (build / ".publisher" / "logs").glob("*.bench.log"):
        shutil.copy(log, out / log.name)
    print(f"publisher bench exit code: {done.returncode}; files in {out}: {', '.join(sorted(os.listdir(out)))}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
