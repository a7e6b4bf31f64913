"""One metrics sample of a running job, in the shape the Hub streams from
`/api/jobs/{namespace}/{id}/metrics` (huggingface_hub's fetch_job_metrics
docstring): cpu_usage_pct, cpu_millicores (the allocation), memory_used_bytes,
memory_total_bytes (the limit), rx_bps, tx_bps, gpus {id: utilization,
memory_used_bytes, memory_total_bytes}, replica."""

from __future__ import annotations

import os
import shutil
import time

from publisher import runner

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def sample(*, cpu_pct: float, cpus: float, memory_used: int, memory_total: int, replica: str) -> dict:
    return {"cpu_usage_pct": round(cpu_pct, 1), "cpu_millicores": int(cpus * 1000),
            "memory_used_bytes": int(memory_used), "memory_total_bytes": int(memory_total),
            "rx_bps": 0, "tx_bps": 0, "gpus": gpus(), "replica": replica}


def gpus() -> dict:
    """This machine's NVIDIA GPUs (nvidia-smi), keyed like the Hub's by a short id; {} without any."""
    if shutil.which("nvidia-smi") is None:
        return {}
    result = runner.run(["nvidia-smi", "--query-gpu=uuid,utilization.gpu,memory.used,memory.total",
                         "--format=csv,noheader,nounits"], timeout=10)
    out = {}
    if not result.ok:
        return out
    for line in result.output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].startswith("GPU-"):
            continue
        try:
            out[parts[0][4:12]] = {"utilization": int(parts[1]), "memory_used_bytes": int(parts[2]) * 1024 * 1024,
                                   "memory_total_bytes": int(parts[3]) * 1024 * 1024}
        except ValueError:
            continue
    return out


class SessionUsage:
    """CPU and memory of every process in a session (Linux /proc), and the CPU
    share used since the previous reading."""

    def __init__(self, sid: int):
        self.sid = sid
        self._last: tuple[float, float] | None = None

    def read(self) -> tuple[float, int]:
        """(CPU cores used since the last reading, resident bytes)."""
        ticks, rss = 0, 0
        for pid in runner._session_members(self.sid):
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
            rss += int(fields[21]) * _PAGE
        now, cpu_seconds = time.monotonic(), ticks / _TICK
        used = 0.0
        if self._last is not None and now > self._last[0]:
            used = max(0.0, (cpu_seconds - self._last[1]) / (now - self._last[0]))
        self._last = (now, cpu_seconds)
        return used, rss


def host_memory() -> int:
    """This machine's RAM in bytes (0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
