"""Benchmark results: one variant's (what the harness measured, judged), and the
per-device files that keep them, build/.publisher/bench/<device-key>.json, one
per device so that results from several GPUs (this machine's, and those that
remote jobs send back) live side by side:

    {"schema": 1,
     "device": {"key", "kind", "name", "capability", "memory_gib", "sms", "cache_bytes"},
     "variants": {<variant>: {"fingerprint", "status", "time", "device": {torch, cuda, driver, ...},
                              "workloads": [...], "problems": [...], ...}}}

A variant's entry describes the build whose metadata.json hashes to its
fingerprint; once the variant is rebuilt the entry is stale and is not shown."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from publisher import state

SCHEMA = 1
DEVICE_KEYS = ("key", "kind", "name", "capability", "memory_gib", "sms", "cache_bytes")
TIMED = ("verified", "unverified")  # workload statuses that carry timings


def fmt_ms(ms: float | None) -> str:
    """A time per call as tables and plots show it."""
    if ms is None:
        return "—"
    return f"{ms * 1000:.2f} µs" if ms < 0.01 else f"{ms * 1000:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


def device_key(device: Mapping) -> str:
    """File name of a device's results: `nvidia-h100-80gb-hbm3`, `cpu-amd-epyc-7b13`."""
    name = str(device.get("name") or "unknown")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:80] or "unknown"
    return f"cpu-{slug}" if device.get("kind") == "cpu" and not slug.startswith("cpu") else slug


@dataclass(frozen=True)
class VariantBench:
    variant: str
    status: str  # ok | failed (a workload's output does not match its reference) | error | skipped
    fingerprint: str | None
    time: str
    device: dict = field(default_factory=dict)  # what the harness saw; empty when it did not run
    workloads: tuple[dict, ...] = ()
    problems: tuple[dict, ...] = ()  # a script that does not import, defines no benchmark, ...
    reason: str = ""  # one line: why not ok
    fix: str = ""
    environment: str = ""
    method: dict = field(default_factory=dict)  # how it was timed (clock, sample length, warmup, iterations)
    scripts_sha256: str = ""  # of benchmarks/benchmark*.py, in order, as run
    seconds: float = 0.0
    log: str | None = None
    output_tail: str = ""

    @property
    def device_key(self) -> str | None:
        return device_key(self.device) if self.device.get("name") and self.status != "skipped" else None

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "skipped")

    def entry(self) -> dict:
        """What the device's results file keeps for this variant."""
        return {"status": self.status, "fingerprint": self.fingerprint, "time": self.time, "reason": self.reason,
                "fix": self.fix, "environment": self.environment, "method": self.method,
                "scripts_sha256": self.scripts_sha256, "seconds": round(self.seconds, 2),
                "device": {k: v for k, v in self.device.items() if k not in DEVICE_KEYS or k == "name"},
                "workloads": list(self.workloads), "problems": list(self.problems)}

    def report(self) -> dict:
        """The --json view: the entry with the whole device, where it was filed, and the log."""
        return {**self.entry(), "device": self.device, "device_key": self.device_key, "log": self.log,
                "output_tail": self.output_tail}

    @classmethod
    def from_report(cls, variant: str, report: Mapping) -> VariantBench:
        """Back from the --json view (`publisher bench --json` run elsewhere, e.g. in a remote job)."""
        known = {f.name for f in fields(cls)} - {"variant"}
        values = {k: v for k, v in report.items() if k in known}
        values["workloads"] = tuple(values.get("workloads") or ())
        values["problems"] = tuple(values.get("problems") or ())
        return cls(variant=variant, **values)


def bench_dir(build_dir: Path) -> Path:
    return state.state_dir(build_dir) / "bench"


def results_path(build_dir: Path, key: str) -> Path:
    return bench_dir(build_dir) / f"{key}.json"


def read_results(path: Path) -> dict:
    """A device's results file; an empty one when absent or unreadable."""
    try:
        data = json.loads(Path(path).read_text())
        if isinstance(data, dict) and isinstance(data.get("variants"), dict) and isinstance(data.get("device"), dict):
            return data
    except (OSError, ValueError):
        pass
    return {"schema": SCHEMA, "device": {}, "variants": {}}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results-")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def record(build_dir: Path, result: VariantBench) -> Path | None:
    """File a variant's result under its device (nothing for a variant that did not run on one)."""
    key = result.device_key
    if key is None:
        return None
    device = {k: result.device.get(k) for k in DEVICE_KEYS if result.device.get(k) is not None}
    return _merge(results_path(build_dir, key), {**device, "key": key}, {result.variant: result.entry()})


def merge_returned(build_dir: Path, returned: Path) -> Path:
    """Take in a device's results file made elsewhere (a remote job's build/.publisher/bench/<key>.json):
    its variants replace this folder's entries for the same device and variants; others are kept."""
    data = read_results(returned)
    if not data["device"].get("name") or not data["variants"]:
        raise ValueError(f"{returned}: not a publisher bench results file (no device or no variants)")
    key = device_key(data["device"])
    return _merge(results_path(build_dir, key), {**data["device"], "key": key}, data["variants"])


def _merge(path: Path, device: dict, variants: dict[str, dict]) -> Path:
    data = read_results(path)
    data["schema"] = SCHEMA
    data["device"] = {**data["device"], **device}
    data["variants"].update(variants)
    _write(path, data)
    return path


@dataclass(frozen=True)
class DeviceResults:
    device: dict
    variants: dict[str, dict]  # variant -> entry, only those that describe the build as it is now
    path: Path


def current_results(build_dir: Path, variants: Mapping[str, Path]) -> list[DeviceResults]:
    """Every device's results for `variants` (name -> build folder) as they are built now: an entry
    whose fingerprint differs from the variant's metadata.json (rebuilt since) is stale, and left out."""
    fingerprints = {}
    for name, folder in variants.items():
        try:
            fingerprints[name] = state.variant_fingerprint(folder)
        except OSError:
            continue
    found = []
    folder = bench_dir(build_dir)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        data = read_results(path)
        fresh = {name: entry for name, entry in sorted(data["variants"].items())
                 if isinstance(entry, dict) and name in fingerprints and entry.get("fingerprint") == fingerprints[name]
                 and entry.get("status") != "skipped"}
        if fresh and data["device"].get("name"):
            found.append(DeviceResults(data["device"], fresh, path))
    return found
