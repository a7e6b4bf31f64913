"""The Jobs hardware flavours (publisher/resources/jobs_hardware.yaml): what
`GET /api/jobs/hardware` answers, which flavour names a job may ask for, and
how much CPU, memory and GPU a flavour stands for."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from publisher.data import read_yaml

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(GB|GiB|MB|TB)", re.IGNORECASE)
_GIB = 1024**3


@dataclass(frozen=True)
class Gpu:
    model: str
    quantity: int
    vram: str


@dataclass(frozen=True)
class Flavor:
    name: str
    pretty_name: str
    cpu: str  # "2 vCPU"
    ram: str  # "16 GB"
    ephemeral_storage: str
    usd_per_hour: float
    gpu: Gpu | None = None

    @property
    def cpus(self) -> float:
        return float(self.cpu.split()[0])

    @property
    def memory_bytes(self) -> int:
        """The flavour's RAM as a limit; the Hub's "GB" are read as GiB (as `docker --memory 16g` does)."""
        match = _SIZE.match(self.ram)
        if not match:
            return 0
        scale = {"gb": _GIB, "gib": _GIB, "mb": 1024**2, "tb": 1024 * _GIB}[match.group(2).lower()]
        return int(float(match.group(1)) * scale)

    @property
    def unit_cost_micro_usd(self) -> int:
        return round(self.usd_per_hour / 60 * 1_000_000)

    def to_api(self) -> dict:
        """One entry of GET /api/jobs/hardware (camelCase, every field the Hub's schema requires)."""
        accelerator = None
        if self.gpu is not None:
            accelerator = {"type": "gpu", "model": self.gpu.model, "quantity": str(self.gpu.quantity),
                           "vram": self.gpu.vram, "manufacturer": "Nvidia"}
        return {"name": self.name, "prettyName": self.pretty_name, "cpu": self.cpu, "ram": self.ram,
                "ephemeralStorage": self.ephemeral_storage, "accelerator": accelerator,
                "unitCostMicroUSD": self.unit_cost_micro_usd,
                "unitCostUSD": round(self.usd_per_hour / 60, 6), "unitLabel": "minute"}


@cache
def flavors() -> dict[str, Flavor]:
    """Every flavour by name, in the Hub's listing order."""
    out = {}
    for item in read_yaml("jobs_hardware.yaml")["flavors"]:
        gpu = item.get("gpu")
        out[item["name"]] = Flavor(
            name=item["name"], pretty_name=item["prettyName"], cpu=item["cpu"], ram=item["ram"],
            ephemeral_storage=item["ephemeralStorage"], usd_per_hour=float(item["usd_per_hour"]),
            gpu=Gpu(gpu["model"], int(gpu["quantity"]), gpu["vram"]) if gpu else None)
    return out


def default_timeout_seconds() -> int:
    return int(read_yaml("jobs_hardware.yaml")["default_timeout_seconds"])
