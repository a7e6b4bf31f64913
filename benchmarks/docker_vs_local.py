"""Docker backend vs local backend for the same variant (default: the
rmsnorm variant of the running torch, from a matrix holding that one cell). Prints a table:

- image:        building the builder image (once per publisher version)
- docker cold:  fresh volumes, so the toolchain (torch) is installed and the
                kernel compiled inside a new container
- docker warm:  a fresh build folder, volumes kept (a CI job with a clean
                checkout): the inner cache answers, nothing is compiled
- docker force: volumes kept, `--force`: the inner cache is skipped; ninja finds the objects
- local:        the local backend, fresh build folder (toolchain already in the user cache)
- local no-op:  the local backend again, nothing changed

Needs a running engine and the base image (.ci/setup-docker.sh).

    python benchmarks/docker_vs_local.py [--project DIR] [--matrix FILE --variant NAME] [--rebuild-image]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from matrix_fixtures import local_variant_name, write_local_matrix  # noqa: E402


def build(project: Path, out: Path, backend: str, variant: str, matrix: Path, env: dict, *extra: str) -> tuple[float, str]:
    t0 = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "publisher", "build", str(project), "--backend", backend, "--variant", variant,
         "--out", str(out), "--matrix", str(matrix), "--json", *extra],
        capture_output=True, text=True, env=env,
    )
    seconds = time.monotonic() - t0
    try:
        state = json.loads(result.stdout)["variants"][0]
    except (ValueError, KeyError, IndexError):
        sys.exit(f"build failed to report:\n{result.stderr[-3000:]}")
    if state["state"] not in ("built", "cached"):
        sys.exit(f"{backend} build {state['state']}: {state.get('error') or state.get('reason')}")
    return seconds, state["state"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, default=REPO / "kernel_projects" / "rmsnorm")
    parser.add_argument("--variant", default=local_variant_name())
    parser.add_argument("--matrix", type=Path, help="matrix holding the variant's cell (default: the running torch's)")
    parser.add_argument("--base-image", default=os.environ.get("PUBLISHER_DOCKER_BASE_IMAGE", "publisher-base:bookworm"))
    parser.add_argument("--rebuild-image", action="store_true", help="remove the builder image first and time its build")
    args = parser.parse_args()
    matrix = args.matrix or write_local_matrix(Path(tempfile.mkdtemp(prefix="bench-matrix-")) / "local.yaml")

    import docker

    from publisher.backends.docker import work_volume

    client = docker.from_env()
    cache_volume = f"publisher-bench-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PUBLISHER_DOCKER_BASE_IMAGE=args.base_image, PUBLISHER_DOCKER_CACHE_VOLUME=cache_volume)
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="docker-vs-local-") as tmp:
        tmp = Path(tmp)
        # A copy at a new path gets its own work volume: nothing from earlier runs.
        project = tmp / args.project.name
        shutil.copytree(args.project, project, ignore=shutil.ignore_patterns("build", "__pycache__", ".git"))
        work_prefix = work_volume(project.resolve(), "")
        try:
            if args.rebuild_image:
                from publisher.backends.docker import DockerBackend

                backend = DockerBackend(base_image=args.base_image)
                backend.check_environment()
                tag = backend._image_tag()
                if any(tag in image.tags for image in client.images.list("publisher-builder")):
                    client.images.remove(tag, force=True)
                seconds, _ = build(project, tmp / "image", "docker", args.variant, matrix, env)
                rows.append(("docker: image + cold build", seconds, "built"))
                client.volumes.get(cache_volume).remove(force=True)
                for volume in client.volumes.list(filters={"name": work_prefix}):
                    volume.remove(force=True)
            seconds, state = build(project, tmp / "cold", "docker", args.variant, matrix, env)
            rows.append(("docker cold (fresh volumes)", seconds, state))
            seconds, state = build(project, tmp / "warm", "docker", args.variant, matrix, env)
            rows.append(("docker warm (fresh build folder)", seconds, state))
            seconds, state = build(project, tmp / "warm", "docker", args.variant, matrix, env, "--force")
            rows.append(("docker warm --force (ninja up to date)", seconds, state))
            seconds, state = build(project, tmp / "local", "local", args.variant, matrix, env)
            rows.append(("local (fresh build folder)", seconds, state))
            seconds, state = build(project, tmp / "local", "local", args.variant, matrix, env)
            rows.append(("local no-op", seconds, state))
        finally:
            for volume in client.volumes.list(filters={"name": cache_volume}):
                volume.remove(force=True)
            for volume in client.volumes.list(filters={"name": work_prefix}):
                volume.remove(force=True)

    print(f"\n{args.project.name} {args.variant} (base image {args.base_image}, {os.cpu_count()} cores)")
    print(f"{'case':<36} {'seconds':>8}  state")
    for name, seconds, state in rows:
        print(f"{name:<36} {seconds:>8.1f}  {state}")


if __name__ == "__main__":
    main()
