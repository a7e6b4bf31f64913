"""Which accelerators a variant's tests see: a cpu (or Python-only torch-cpu)
variant is tested with every accelerator of the platform hidden, as a user
without one runs it; any other variant with the machine's devices. And whether
this machine shows the accelerator a variant needs. The facts (variables per
runtime, signs of a device) are in resources/accelerators.yaml."""

from __future__ import annotations

import glob
import re
import shutil
from dataclasses import dataclass

from publisher.data import read_yaml
from publisher.plan.variants import Variant

# backends whose variants run on the CPU alone
CPU_BACKENDS = ("cpu",)


@dataclass(frozen=True)
class Hiding:
    env: dict[str, str]  # variables set for the test process
    hidden: tuple[str, ...]  # accelerator names, as shown to the user ("CUDA", "MPS")
    torch_checks: tuple[str, ...]  # torch availability checks the plugin makes answer False


def hiding_for(variant: Variant, platform: str) -> Hiding | None:
    """How to hide the platform's accelerators from `variant`'s tests; None when it runs with them."""
    if variant.backend not in CPU_BACKENDS:
        return None
    env: dict[str, str] = {}
    hidden: list[str] = []
    checks: list[str] = []
    for entry in read_yaml("accelerators.yaml")["accelerators"]:
        if platform not in entry["platforms"]:
            continue
        env.update({str(k): str(v) for k, v in (entry.get("env") or {}).items()})
        hidden.append(entry["name"])
        if entry.get("torch_check") and entry["torch_check"] not in checks:
            checks.append(entry["torch_check"])
    return Hiding(env, tuple(hidden), tuple(checks))


def missing_accelerator(backend: str, platform: str) -> str | None:
    """Why this machine cannot run a `backend` variant, from what the system shows (device files,
    management programs), before any environment is made for it; None when it may."""
    for entry in read_yaml("accelerators.yaml")["accelerators"]:
        if backend not in (entry.get("backends") or ()):
            continue
        if platform not in entry["platforms"]:
            return f"needs {entry['name']}, which {platform} does not have"
        signs = entry.get("present_if")
        if signs is None or any(glob.glob(pattern) for pattern in signs.get("files") or ()) \
                or any(shutil.which(program) for program in signs.get("programs") or ()):
            return None
        return f"needs a {entry['name']} device; this machine shows none"
    return None


def asked_for_hidden(message: str, hidden: tuple[str, ...] | list[str]) -> str | None:
    """The hidden accelerator a test's error says it asked for (torch's words for a missing device), or None."""
    for entry in read_yaml("accelerators.yaml")["accelerators"]:
        words = entry.get("absent_words")
        if entry["name"] in hidden and words and re.search(words, message or ""):
            return str(entry["name"])
    return None
