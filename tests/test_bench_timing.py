"""How `publisher bench` times a workload: samples of back-to-back calls,
inputs rotated over copies, kernel and reference taking turns, median and
quartiles (publisher/bench/timing.py, which runs in the variant's environment)."""

from __future__ import annotations

import pytest

from publisher.bench import timing


class FakeClock:
    """Each call costs `cost[name]` ms; a sample measures the calls it makes."""

    name = "fake"

    def __init__(self):
        self.elapsed = 0.0
        self.measured: list[float] = []

    def sync(self) -> None:
        pass

    def measure(self, work) -> float:
        before = self.elapsed
        work()
        self.measured.append(self.elapsed - before)
        return self.elapsed - before


def test_stats_are_the_median_and_quartiles_of_the_samples():
    s = timing.stats([5.0, 1.0, 3.0, 2.0, 4.0, 100.0])
    assert s["median_ms"] == pytest.approx(3.5) and s["samples"] == 6
    assert s["q1_ms"] == pytest.approx(2.25) and s["q3_ms"] == pytest.approx(4.75) and s["iqr_ms"] == pytest.approx(2.5)
    assert (s["min_ms"], s["max_ms"]) == (1.0, 100.0) and s["outliers"] == 1  # 100 is past q3 + 1.5 IQR
    assert timing.stats([2.0])["median_ms"] == 2.0 and timing.stats([2.0])["iqr_ms"] == 0.0


def test_a_rotation_takes_the_copies_in_turn_across_samples():
    seen = []
    rotation = timing.Rotation([lambda i=i: seen.append(i) for i in range(3)])
    rotation.run(2)
    rotation.run(4)
    assert seen == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("footprint, cache, free, copies", [
    (64 << 20, 50 << 20, None, 4),  # 4 x 50 MiB of L2 over 64 MiB inputs
    (1 << 10, 50 << 20, None, timing.MAX_COPIES),  # tiny inputs: as many as allowed
    (1 << 20, 50 << 20, None, 200),  # 1 MiB inputs: 200 copies span 4 x 50 MiB
    (512 << 20, 50 << 20, None, 1),  # inputs far larger than the cache: one copy is enough
    (64 << 20, 50 << 20, 600 << 20, 2),  # a quarter of the free memory holds two copies
    (64 << 20, 50 << 20, 10 << 20, 1),  # never fewer than the one the benchmark made
    (0, 50 << 20, None, 1),  # no tensors found
    (64 << 20, 0, None, 1),  # cache size unknown
])
def test_copies_span_several_caches_within_the_memory_share(footprint, cache, free, copies):
    assert timing.copies_for(footprint, cache, free) == copies


def test_a_sample_holds_enough_calls_for_the_target_length():
    clock = FakeClock()

    def call():
        clock.elapsed += 0.003  # 3 µs a call

    n = timing.calls_per_sample(timing.Rotation([call]), clock)
    assert n * 0.003 >= timing.TARGET_MS and n * 0.003 < 2 * timing.TARGET_MS

    slow = FakeClock()

    def slow_call():
        slow.elapsed += 40.0

    assert timing.calls_per_sample(timing.Rotation([slow_call]), slow) == 1


def test_kernel_and_reference_take_turns_and_report_time_per_call():
    clock = FakeClock()
    order = []

    def contender(name, ms):
        def call():
            order.append(name)
            clock.elapsed += ms
        return call

    result = timing.time_contenders({"kernel": timing.Rotation([contender("kernel", 0.5)]),
                                     "reference": timing.Rotation([contender("reference", 1.5)])},
                                    clock, warmup=3, iterations=4)
    assert result["kernel"]["median_ms"] == pytest.approx(0.5) and result["kernel"]["samples"] == 4
    assert result["reference"]["median_ms"] == pytest.approx(1.5)
    # at least TARGET_MS (2 ms) a sample: 5 calls of 0.5 ms (1 timed, then 10 % over the target), 2 of 1.5 ms
    assert result["kernel"]["calls_per_sample"] == 5 and result["reference"]["calls_per_sample"] == 2
    assert all(ms >= timing.TARGET_MS for ms in clock.measured[-8:])
    assert order[:6] == ["kernel"] * 3 + ["reference"] * 3  # warm-up
    # after calibration: samples alternate kernel, reference, reference, kernel, ...
    timed = order[-(4 * 5 + 4 * 2):]
    assert timed[:14] == ["kernel"] * 5 + ["reference"] * 4 + ["kernel"] * 5
