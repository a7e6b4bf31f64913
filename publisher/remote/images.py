"""The image a remote job runs a variant in (resources/job_images.yaml has the
images and the rules' words)."""

from __future__ import annotations

from packaging.version import Version

from publisher.data import read_yaml
from publisher.plan.variants import Variant


def _cuda(compute: str) -> str | None:
    """cu130 -> "13.0", cu126 -> "12.6"; None for a compute that is not CUDA."""
    if not compute.startswith("cu") or not compute[2:].isdigit() or len(compute) < 4:
        return None
    digits = compute[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def image_for(variant_name: str, build: bool = False) -> str | None:
    """The public image whose torch and CUDA load this variant (build: and compile it); None when the
    data knows none."""
    table = dict(read_yaml("job_images.yaml"))
    if build:
        table["template"] = table["build_template"]
    releases = sorted(table["releases"], key=lambda r: Version(str(r["torch"])), reverse=True)
    variant = Variant.parse(variant_name)
    if variant.framework == "torch-noarch":
        if variant.compute not in ("cuda", "cpu"):
            return None
        newest = releases[0]
        return table["template"].format(torch=newest["torch"], cuda=newest["cuda"][-1])
    cuda = _cuda(variant.compute) if variant.compute != "cpu" else None
    if (cuda is None and variant.compute != "cpu") or variant.version is None:
        return None
    wanted = Version(variant.version)
    for release in releases:
        torch = Version(str(release["torch"]))
        minor = Version(f"{torch.major}.{torch.minor}")
        fits = minor == wanted if variant.framework == "torch" else minor >= wanted
        published = [str(c) for c in release["cuda"]]
        if fits and (cuda in published or cuda is None):  # a cpu variant runs on a CUDA build of its torch
            return table["template"].format(torch=release["torch"], cuda=cuda or published[-1])
    return None
