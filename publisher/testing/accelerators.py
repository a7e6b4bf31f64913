"""Which accelerators a variant's tests see: a cpu (or Python-only torch-cpu)
variant is tested with every accelerator of the platform hidden, as a user
without one runs it; any other variant with the machine's devices. The facts
(variables per runtime) are in resources/accelerators.yaml."""

from __future__ import annotations

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
