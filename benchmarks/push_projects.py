"""The two built projects the push benchmarks name SCALE and BIG, made from scratch:

    .venv/bin/python benchmarks/push_projects.py DEST

DEST/scale is the push tests' `scale` kernel (Python-only, variants torch-cpu and
torch-cuda, 8 files, 34 KiB in build/); DEST/big is the same kernel with a
48 MiB binary in each variant (96 MiB in build/). Both are built with
`publisher build --local`, as a user would; then pass DEST/scale or DEST/big to
push_vs_upload_folder.py / push_fixed_costs.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from push_fixtures import write_scale  # noqa: E402  (the push tests' project, written once for both)

BIG_BINARY = 48 * 1024 * 1024


def make(root: Path, binary_size: int | None = None) -> None:
    write_scale(root)
    if binary_size:
        (root / "torch-ext" / "scale" / "table.bin").write_bytes(os.urandom(binary_size))
    built = subprocess.run([sys.executable, "-m", "publisher", "build", "--local", str(root)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise SystemExit(f"{root}: build failed\n{built.stdout[-2000:]}{built.stderr[-2000:]}")
    print(f"{root}: built")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dest", type=Path)
    dest = parser.parse_args().dest.resolve()
    make(dest / "scale")
    make(dest / "big", BIG_BINARY)


if __name__ == "__main__":
    main()
