"""    python3 benchmarks/compile_sampler.py OUT.txt STOPFILE &   (then build; touch STOPFILE)

Sample the compile processes every 0.5 s until the file STOP appears: time, then
each process name with its pinned CPU list (what runs at once, and where)."""
import os
import sys
import time

out, stop = sys.argv[1], sys.argv[2]
names = ("cicc", "ptxas", "cudafe++", "cc1plus", "fatbinary", "nvlink", "nvcc")
t0 = time.time()
with open(out, "w") as fh:
    while not os.path.exists(stop):
        row = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                comm = open(f"/proc/{pid}/comm").read().strip()
                if comm in names:
                    cmd = open(f"/proc/{pid}/cmdline").read().split("\0")
                    tag = next((a for a in cmd if "/tmp/r" in a), "")[:40]
                    row.append(f"{comm}@{tag.split('/')[2] if tag.count('/') > 2 else '?'}")
            except OSError:
                pass
        fh.write(f"{time.time() - t0:7.1f} {' '.join(sorted(row))}\n")
        fh.flush()
        time.sleep(0.5)
