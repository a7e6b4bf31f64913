"""ABI check of compiled variants with `kernel-abi-check` (PyPI): Python
abi3 >= 3.9 and manylinux_2_28 symbol versions, as upstream checks builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PYTHON_ABI = "3.9"
MANYLINUX = "manylinux_2_28"


@dataclass(frozen=True)
class AbiReport:
    checked: tuple[str, ...] = ()  # file names checked
    violations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict:
        return {"ok": self.ok, "violations": list(self.violations)}


def check_abi(variant_dir: Path) -> AbiReport:
    """Check every shared object in the variant folder."""
    try:
        import kernel_abi_check as kac
    except ImportError:
        return AbiReport((), ("kernel-abi-check is not installed (pip install kernel-abi-check); ABI not checked",))
    checked: list[str] = []
    violations: list[str] = []
    for so in sorted(Path(variant_dir).rglob("*.so")):
        checked.append(so.name)
        obj = kac.ObjectFile(str(so))
        for v in obj.check_python_abi(PYTHON_ABI):
            added = getattr(v, "version_added", None)
            violations.append(
                f"{so.name}: Python symbol {v.name} "
                + (f"needs Python {added} (abi3 {PYTHON_ABI} wanted)" if added else "is not in the stable ABI (abi3)")
            )
        for v in obj.check_manylinux(MANYLINUX):
            why = (f": this machine's {'C' if v.dep == 'GLIBC' else 'C++'} library gives it, and publisher's glibc "
                   "compat layer has no older stand-in for it; build in the manylinux_2_28 "
                   "image (--backend docker) or on an older system" if v.dep in ("GLIBC", "GLIBCXX", "CXXABI") else "")
            violations.append(f"{so.name}: {v.name}@{v.version} from {v.dep} is newer than {MANYLINUX} allows{why}")
    return AbiReport(tuple(checked), tuple(violations))
