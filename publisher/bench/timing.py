"""How a workload is timed: as a user's code runs it, calls launched one after
another from Python, never synchronised in between.

- Inputs are rotated: the benchmark's setup runs on several instances (copies
  of its tensors), enough that together they span several times the device's
  last-level cache (within a share of the free memory and a few seconds of
  setup), and consecutive calls take them in turn, so no call finds its inputs
  left in the cache by the one before.
- A sample is a run of calls long enough (TARGET_MS) that the first call's
  launch latency and the clock's resolution do not matter; its time per call
  is the sample's time divided by its calls. On CUDA (and ROCm) the clock is a
  pair of CUDA events on the stream the calls are launched on, so the time is
  the GPU's where the GPU is the bottleneck, and the host's cost per call where
  the host is; elsewhere it is time.perf_counter around the run, ended by the
  device's synchronize.
- The kernel and its reference take turns, sample by sample, so drift in
  clocks or temperature hits both alike; each reports the median and the
  spread (quartiles, IQR, min, max) of its samples.

Standalone (stdlib + torch): the harness imports it in the variant's own
environment, where publisher need not be installed."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence

TARGET_MS = 2.0  # length of one sample
MAX_CALLS_PER_SAMPLE = 100_000
CACHE_MULTIPLE = 4  # the rotated copies together span this many last-level caches
MAX_COPIES = 1024
MEMORY_SHARE = 0.25  # the copies take at most this share of the device's free memory
SETUP_BUDGET_S = 5.0  # no more copies are set up once this long was spent on them


class Rotation:
    """Calls taken in turn, one per copy of the inputs; `run(n)` makes the next n calls."""

    def __init__(self, calls: Sequence[Callable[[], object]]):
        self.calls = list(calls)
        self.next = 0

    def run(self, n: int) -> None:
        calls, count, i = self.calls, len(self.calls), self.next
        for _ in range(n):
            calls[i]()
            i = i + 1 if i + 1 < count else 0
        self.next = i


class EventClock:
    """CUDA events around the calls, on the current stream (where they are launched)."""

    name = "CUDA events on the launching stream"

    def __init__(self, torch):
        self.torch = torch

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def measure(self, work: Callable[[], None]) -> float:
        start = self.torch.cuda.Event(enable_timing=True)
        end = self.torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


class WallClock:
    """time.perf_counter around the calls, ended by the device's synchronize (none on the CPU)."""

    name = "time.perf_counter"

    def __init__(self, synchronize: Callable[[], None] | None = None):
        self.synchronize = synchronize or (lambda: None)

    def sync(self) -> None:
        self.synchronize()

    def measure(self, work: Callable[[], None]) -> float:
        start = time.perf_counter()
        work()
        self.synchronize()
        return (time.perf_counter() - start) * 1000.0


def clock_for(torch, device: str):
    if device == "cuda":
        return EventClock(torch)
    if device == "xpu":
        return WallClock(torch.xpu.synchronize)
    if device == "mps":
        return WallClock(torch.mps.synchronize)
    return WallClock()


def calls_per_sample(rotation: Rotation, clock) -> int:
    """How many calls make a sample of about TARGET_MS (found by timing growing runs)."""
    n = 1
    for _ in range(8):
        ms = clock.measure(lambda n=n: rotation.run(n))
        if ms >= TARGET_MS or n >= MAX_CALLS_PER_SAMPLE:
            break
        n = min(MAX_CALLS_PER_SAMPLE, max(2 * n, math.ceil(n * TARGET_MS * 1.1 / max(ms, 1e-4))))
    return n


def time_contenders(contenders: dict[str, Rotation], clock, warmup: int, iterations: int) -> dict[str, dict]:
    """Per contender (name -> its rotation): stats of `iterations` samples, after `warmup` calls each.
    The contenders take turns, in alternating order."""
    for rotation in contenders.values():
        rotation.run(warmup)
    clock.sync()
    sizes = {name: calls_per_sample(rotation, clock) for name, rotation in contenders.items()}
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for i in range(iterations):
        for name in order if i % 2 == 0 else reversed(order):
            n = sizes[name]
            samples[name].append(clock.measure(lambda r=contenders[name], n=n: r.run(n)) / n)
    return {name: {**stats(values), "calls_per_sample": sizes[name]} for name, values in samples.items()}


def _quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between the closest ranks (numpy's default)."""
    if len(ordered) == 1:
        return ordered[0]
    at = (len(ordered) - 1) * q
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def stats(values: Sequence[float]) -> dict:
    """Median and spread (ms); outliers: outside the quartiles by more than 1.5 IQR."""
    ordered = sorted(values)
    q1, median, q3 = (_quantile(ordered, q) for q in (0.25, 0.5, 0.75))
    iqr = q3 - q1
    mean = sum(ordered) / len(ordered)
    std = math.sqrt(sum((v - mean) ** 2 for v in ordered) / len(ordered))
    outliers = sum(1 for v in ordered if v < q1 - 1.5 * iqr or v > q3 + 1.5 * iqr)
    return {"samples": len(ordered), "median_ms": median, "q1_ms": q1, "q3_ms": q3, "iqr_ms": iqr,
            "min_ms": ordered[0], "max_ms": ordered[-1], "mean_ms": mean, "std_ms": std, "outliers": outliers}


def copies_for(footprint: int, cache_bytes: int, free_bytes: int | None) -> int:
    """How many copies of a workload's tensors (`footprint` bytes each) to rotate over."""
    if footprint <= 0 or cache_bytes <= 0:
        return 1
    copies = min(MAX_COPIES, max(1, math.ceil(CACHE_MULTIPLE * cache_bytes / footprint)))
    if free_bytes is not None:
        copies = min(copies, max(1, int(MEMORY_SHARE * free_bytes // footprint)))
    return copies


def cpu_cache_bytes() -> int:
    """The largest cache of CPU 0 (Linux sysfs); 0 where it cannot be read."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        return 0
    for entry in entries:
        try:
            with open(os.path.join(base, entry, "size")) as fh:
                text = fh.read().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best


def free_cpu_memory() -> int | None:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
