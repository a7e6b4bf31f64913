"""The README's first command on a fresh clone, step by step.

Clones this repository (HEAD) into a temporary folder, takes the first
```bash block of its README.md, runs each `&&` step in the clone and prints a
table: seconds and exit code per step, then the total. Stops at the first
failing step, as the command does.

    python benchmarks/readme_first_command.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def first_command(readme: Path) -> list[str]:
    block = re.search(r"```bash\n(.*?)\n```", readme.read_text(), re.S)
    if not block:
        raise SystemExit(f"{readme}: no ```bash block")
    return block.group(1).splitlines()[0].split(" && ")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", type=Path, help="clone into this (new) folder and keep it")
    opts = ap.parse_args()
    base = opts.keep or Path(tempfile.mkdtemp(prefix="publisher-readme-"))
    clone = base / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    log = base / "readme.log"
    rows: list[tuple[str, float, int]] = []
    start = time.perf_counter()
    with log.open("w") as out:
        for step in first_command(clone / "README.md"):
            t0 = time.perf_counter()
            rc = subprocess.run(["bash", "-c", step], cwd=clone, stdout=out, stderr=subprocess.STDOUT,
                                env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}).returncode
            rows.append((step, time.perf_counter() - t0, rc))
            if rc:
                break
    total = time.perf_counter() - start
    print(f"{'seconds':>8}  {'rc':>3}  step")
    for step, seconds, rc in rows:
        print(f"{seconds:8.1f}  {rc:3d}  {step}")
    print(f"{total:8.1f}  {rows[-1][2]:3d}  total (log: {log})")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if not opts.keep:
        shutil.rmtree(clone, ignore_errors=True)


if __name__ == "__main__":
    main()
