"""The machine publisher runs on, named as variant names name platforms
(`x86_64-linux`, `aarch64-darwin`): plan, toolchains and tests ask here."""

from __future__ import annotations

import platform
import sys

_CPUS = {"amd64": "x86_64", "arm64": "aarch64"}  # Windows and macOS spellings
_SYSTEMS = {"win32": "windows"}


def host_platform() -> str:
    cpu = platform.machine().lower()
    return f"{_CPUS.get(cpu, cpu)}-{_SYSTEMS.get(sys.platform, sys.platform)}"
