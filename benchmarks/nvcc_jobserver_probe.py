"""    python3 benchmarks/nvcc_jobserver_probe.py WORKDIR   (needs nvcc and ninja on PATH)

Does nvcc's `--jobserver` take slots from a GNU make jobserver pool (seen: relu.cu
compiled one architecture at a time with 4 free slots, two at a time with 2)?
Each case: a fifo pool of T tokens advertised as -jT, nvcc --threads=10
--jobserver on one .cu, alone or under ninja (one edge, or the edge beside two
8-second C++ edges); prints the most `cicc` running at once and the wall time."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ARCHS = [75, 80, 86, 87, 89, 90, 100, 103, 110, 120]
SRC = r'''
#include <cub/cub.cuh>
template <int N> __global__ void k(float* x) {
  typedef cub::BlockRadixSort<float, 128, N> S; __shared__ typename S::TempStorage t; float v[N];
  for (int i = 0; i < N; i++) v[i] = x[threadIdx.x * N + i];
  S(t).Sort(v);
  for (int i = 0; i < N; i++) x[threadIdx.x * N + i] = v[i];
}
''' + "".join(f"template __global__ void k<{n}>(float*);\n" for n in range(1, 17))


def count_cicc() -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                n += open(f"/proc/{pid}/comm").read().strip() == "cicc"
            except OSError:
                pass
    return n


def case(name: str, tokens: int, ninja: bool, extra_edges: int, work: str) -> None:
    d = Path(tempfile.mkdtemp(dir=work))
    (d / "k.cu").write_text(SRC)
    (d / "a.cc").write_text("int a() { return 1; }\n")
    fifo = d / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    os.write(fd, b"+" * tokens)
    env = {**os.environ, "MAKEFLAGS": f"-j{tokens} --jobserver-auth=fifo:{fifo}"}
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]
    nvcc = ["nvcc", "-c", "k.cu", "-o", "k.o", "--threads=10", "--jobserver", *gencode]
    if ninja:
        rules = "rule nv\n  command = " + " ".join(nvcc) + "\nrule cc\n  command = g++ -c $in -o $out && sleep 8\n"
        edges = "build k.o: nv k.cu\n" + "".join(f"build a{i}.o: cc a.cc\n" for i in range(extra_edges))
        (d / "build.ninja").write_text(rules + edges)
        argv = ["ninja"]
    else:
        argv = nvcc
    peak, done = [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], count_cicc())
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    t0 = time.time()
    result = subprocess.run(argv, cwd=d, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    done.set()
    watcher.join()
    back = 0
    try:
        while os.read(fd, 1):
            back += 1
    except BlockingIOError:
        pass
    failed = "" if result.returncode == 0 else " " + (result.stderr or result.stdout)[-300:]
    print(f"{name:<44} tokens {tokens}  wall {wall:6.1f} s  max cicc {peak[0]}  tokens back {back}/{tokens}  "
          f"rc {result.returncode}{failed}", flush=True)


def main() -> None:
    work = sys.argv[1]
    subprocess.run(["ninja", "--version"])
    subprocess.run(["nvcc", "--version"])
    for name, tokens, ninja, extra in [("nvcc alone", 4, False, 0), ("nvcc alone", 2, False, 0),
                                       ("ninja: the nvcc edge alone", 4, True, 0),
                                       ("ninja: nvcc edge + 2 C++ edges (8 s)", 4, True, 2),
                                       ("ninja: nvcc edge + 2 C++ edges (8 s)", 2, True, 2)]:
        case(name, tokens, ninja, extra, work)


if __name__ == "__main__":
    main()
