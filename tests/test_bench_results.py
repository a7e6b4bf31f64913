"""Benchmark results filed per device (build/.publisher/bench/<device-key>.json):
several devices side by side, a remote job's file merged in, and a rebuilt
variant's old results left out as stale."""

from __future__ import annotations

import json

import pytest

from publisher.bench.results import VariantBench, current_results, device_key, merge_returned, read_results, record

H100 = {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "memory_gib": 79.2, "sms": 132,
        "cache_bytes": 52428800, "torch": "2.11.0+cu130", "cuda": "13.0", "driver": "580.159.04"}
L4 = {**H100, "name": "NVIDIA L4", "capability": "8.9", "memory_gib": 22.0, "sms": 58}
WORKLOAD = {"script": "benchmarks/benchmark.py", "benchmark": "RMSNorm", "workload": "bf16", "status": "verified",
            "kernel": {"median_ms": 0.065, "iqr_ms": 0.001, "samples": 100, "calls_per_sample": 31},
            "reference": {"median_ms": 0.101, "iqr_ms": 0.002, "samples": 100, "calls_per_sample": 20},
            "speedup": 0.101 / 0.065, "copies": 4, "footprint_bytes": 64 << 20, "rotation_bytes": 256 << 20}


def variant(build, name: str, meta: str = '{"version": 1}') -> str:
    (build / name).mkdir(parents=True, exist_ok=True)
    (build / name / "metadata.json").write_text(meta)
    return name


def bench(build, name: str, device: dict, **kw) -> VariantBench:
    from publisher import state

    values = {"status": "ok", "time": "2026-11-25T10:00:00+00:00", "device": device, "workloads": (WORKLOAD,), **kw}
    return VariantBench(variant=name, fingerprint=state.variant_fingerprint(build / name), **values)


@pytest.mark.parametrize("device, key", [
    ({"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"}, "nvidia-h100-80gb-hbm3"),
    ({"kind": "cpu", "name": "AMD EPYC 7B13 64-Core Processor"}, "cpu-amd-epyc-7b13-64-core-processor"),
    ({"kind": "cpu", "name": "cpu model unknown"}, "cpu-model-unknown"),
    ({"kind": "cuda", "name": "../../etc"}, "etc"),
])
def test_device_keys_are_file_names(device, key):
    assert device_key(device) == key


def test_devices_live_side_by_side_and_a_variant_is_updated_in_place(tmp_path):
    build = tmp_path / "build"
    name = variant(build, "torch211-cxx11-cu130-x86_64-linux")
    h100 = record(build, bench(build, name, H100))
    l4 = record(build, bench(build, name, L4))
    assert h100.name == "nvidia-h100-80gb-hbm3.json" and l4.name == "nvidia-l4.json"
    assert read_results(h100)["device"] == {"key": "nvidia-h100-80gb-hbm3", "kind": "cuda", "name": H100["name"],
                                            "capability": "9.0", "memory_gib": 79.2, "sms": 132,
                                            "cache_bytes": 52428800}
    entry = read_results(h100)["variants"][name]
    assert entry["device"]["torch"] == "2.11.0+cu130" and entry["device"]["driver"] == "580.159.04"
    other = variant(build, "torch212-cxx11-cu130-x86_64-linux")
    record(build, bench(build, other, H100, status="failed"))
    record(build, bench(build, name, H100, time="2026-11-26T10:00:00+00:00"))
    variants = read_results(h100)["variants"]
    assert sorted(variants) == [name, other] and variants[name]["time"].startswith("2026-11-26")


def test_a_variant_that_did_not_run_is_not_filed(tmp_path):
    build = tmp_path / "build"
    name = variant(build, "torch211-cxx11-cu130-x86_64-linux")
    assert record(build, bench(build, name, {"kind": "cpu", "name": "AMD EPYC"}, status="skipped")) is None
    assert record(build, bench(build, name, {}, status="error")) is None
    assert not (build / ".publisher" / "bench").exists()


def test_results_of_a_rebuilt_variant_are_stale(tmp_path):
    build = tmp_path / "build"
    name = variant(build, "torch211-cxx11-cu130-x86_64-linux")
    record(build, bench(build, name, H100))
    (devices,) = current_results(build, {name: build / name})
    assert devices.device["name"] == H100["name"] and list(devices.variants) == [name]
    variant(build, name, '{"version": 1, "rebuilt": true}')
    assert current_results(build, {name: build / name}) == []
    # and a variant not in the release is not shown either
    assert current_results(build, {}) == []


def test_a_remote_jobs_file_is_merged_into_its_device(tmp_path):
    build = tmp_path / "build"
    mine = variant(build, "torch211-cxx11-cu130-x86_64-linux")
    theirs = variant(build, "torch212-cxx11-cu130-x86_64-linux")
    record(build, bench(build, mine, H100))
    job = tmp_path / "job" / "build"
    variant(job, theirs)
    returned = record(job, bench(job, theirs, H100, time="2026-11-27T00:00:00+00:00"))
    merged = merge_returned(build, returned)
    assert merged == build / ".publisher" / "bench" / "nvidia-h100-80gb-hbm3.json"
    assert sorted(read_results(merged)["variants"]) == [mine, theirs]
    (junk := tmp_path / "junk.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not a publisher bench results file"):
        merge_returned(build, junk)


def test_a_result_comes_back_from_its_json_report(tmp_path):
    build = tmp_path / "build"
    name = variant(build, "torch211-cxx11-cu130-x86_64-linux")
    original = bench(build, name, H100, method={"clock": "CUDA events on the launching stream"}, log="/x.log",
                     seconds=12.5)
    again = VariantBench.from_report(name, json.loads(json.dumps(original.report())))
    assert again == original and again.device_key == "nvidia-h100-80gb-hbm3"
