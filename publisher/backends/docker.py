"""The Docker backend: the local backend, run inside a builder container.

- The builder image (publisher/resources/docker/Dockerfile) is built once per
  base image and publisher source, on the engine, and reused.
- One container per toolchain (ToolchainSpec.key), started on first use and
  reused for every variant that shares it; `close()` removes them all.
- The project is mounted read-only (its git work tree too, for provenance);
  toolchains, uv/pip caches and the inner build folders (object files, the
  inner build cache) live in named volumes, so a second build downloads and
  compiles nothing it already has.
- Each variant is built by `publisher build --backend local` inside, through
  `docker exec` run by publisher.runner, so Ctrl-C or a cancelled build stops
  it like a local compiler; the finished variant is copied out of the
  container as a tar stream into the staging folder (owned by the invoking
  user, whatever uid wrote it inside).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import threading
import uuid
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import ClassVar

from publisher import __version__, distribution, env, git
from publisher.backends.docker_settings import IndexSettings, host_index_settings
from publisher.builder.backend import BackendSettings, BuildOutcome, BuildRequest, LineSink
from publisher.errors import BuildFailed, EnvironmentProblem, ToolchainUnavailable
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project
from publisher.runner import run

LABEL = "org.huggingface.publisher"  # every container we start carries it
# Toolchains, uv and pip caches, shared by all projects.
CACHE_VOLUME = env.docker_cache_volume()
SRC = PurePosixPath("/src")  # the project (or its git work tree), read-only
OUT = PurePosixPath("/out")  # inner build folders, one per variant
DEFAULT_BASE_IMAGE = {"x86_64": "quay.io/pypa/manylinux_2_28_x86_64", "aarch64": "quay.io/pypa/manylinux_2_28_aarch64"}
ENGINE_HINT = (
    "start the Docker engine (`sudo systemctl start docker`, or run `dockerd` as root; "
    "on CI machines `.ci/setup-docker.sh` does both), or point DOCKER_HOST at a running engine "
    "(e.g. DOCKER_HOST=unix:///run/user/$UID/docker.sock for rootless Docker)"
)


class DockerBackend:
    name: ClassVar[str] = "docker"

    def __init__(
        self,
        *,
        base_image: str | None = None,
        ca_bundle: Path | None = None,
        index_url: str | None = None,
        extra_index_urls: tuple[str, ...] = (),
        find_links: tuple[str, ...] = (),
        matrix_file: Path | None = None,
        owner: tuple[int, int] | None = None,
    ):
        """`base_image`: what the builder image is made from (default:
        $PUBLISHER_DOCKER_BASE_IMAGE, else manylinux_2_28 for this CPU).
        `ca_bundle` / index options: passed into the build (default: the
        host's pip settings). `owner`: (uid, gid) for the copied-out files
        (default: the invoking user)."""
        self.base_image = base_image or env.docker_base_image() or DEFAULT_BASE_IMAGE.get(
            os.uname().machine, DEFAULT_BASE_IMAGE["x86_64"]
        )
        self.settings: IndexSettings = host_index_settings(ca_bundle, index_url, extra_index_urls, find_links)
        self.matrix_file = Path(matrix_file).resolve() if matrix_file else None
        self.owner = owner or (os.getuid(), os.getgid())
        self._client = None
        self._image: str | None = None
        self._containers: dict[str, object] = {}
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def from_settings(cls, settings: BackendSettings, project: Project) -> DockerBackend:
        return cls(base_image=settings.base_image, ca_bundle=settings.ca_bundle, index_url=settings.index_url,
                   extra_index_urls=settings.extra_index_urls, matrix_file=settings.matrix_file)

    # -- the Backend interface -------------------------------------------

    def check_environment(self) -> None:
        try:
            import docker
        except ImportError:
            raise EnvironmentProblem(
                "the docker backend needs the Docker SDK for Python", "pip install 'publisher[docker]'"
            ) from None
        if shutil.which("docker") is None:
            raise EnvironmentProblem(
                "the docker backend needs the `docker` command", "install the Docker CLI (Debian/Ubuntu: apt-get install docker.io)"
            )
        try:
            client = docker.from_env(timeout=600)
            client.ping()
        except docker.errors.DockerException as err:
            where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
            raise EnvironmentProblem(f"no Docker engine answers at {where} ({_short(err)})", ENGINE_HINT) from None
        self._client = client
        _remove_orphans(client)

    def input_identity(self, planned: PlannedVariant) -> str:
        return f"docker image={self._image_tag()} toolchain={planned.toolchain.key}"

    def build(self, request: BuildRequest, on_line: LineSink) -> BuildOutcome:
        project_root = request.project.root
        assert project_root is not None
        platform = request.planned.toolchain.platform
        if platform != self._engine_platform():
            raise ToolchainUnavailable(f"{platform} toolchains cannot run on this {self._engine_platform()} Docker engine")
        container = self._container(request, on_line)
        variant = request.planned.name
        inner_out = OUT / variant
        argv = [
            "docker", "exec", container.id,
            "publisher", "build", str(self._project_in_container(project_root)),
            "--backend", "local", "--variant", variant, "--out", str(inner_out),
            "--jobs", "1", "--cores", str(max(1, request.options.cores)),
            "--no-hub-cache",  # the outer driver has looked at the Hub already
        ]
        if self.matrix_file:
            argv += ["--matrix", "/etc/publisher/matrix.yaml"]
        # --strict stays outside: the outer driver checks the ABI of what comes out.
        argv += [flag for flag, on in (("--force", request.options.force), ("--debug", request.options.debug)) if on]
        inner_log = inner_out / ".publisher" / "logs" / f"{variant}.log"
        # the output folder lives in a cache volume: a cached inner build writes no log, so
        # an earlier build's log must not be there to be taken for this one
        container.exec_run(["rm", "-f", str(inner_log)])
        result = run(argv, log=request.log, on_line=on_line)
        self._append_inner_log(container, inner_log, request.log)
        entry = self._inner_report(container, inner_out).get(variant) or {}
        if entry.get("state") == "unavailable":
            raise ToolchainUnavailable(entry.get("reason") or "toolchain unavailable inside the container")
        if not result.ok or entry.get("state") not in ("built", "cached"):
            raise BuildFailed(entry.get("error") or result.first_error_line())
        self._copy_out(container, inner_out / variant, request.stage_dir)
        return BuildOutcome(toolchain={**(entry.get("toolchain") or {}), "image": self._image_tag()})

    def _engine_platform(self) -> str:
        arch = self._client.info().get("Architecture", "")
        return f"{ {'amd64': 'x86_64', 'arm64': 'aarch64'}.get(arch, arch)}-linux"

    def close(self) -> None:
        """Remove every container this backend started (also after Ctrl-C)."""
        with self._lock:
            self._closed = True
            containers, self._containers = list(self._containers.values()), {}
        for container in containers:
            try:
                container.remove(force=True)
            except Exception:  # already gone; nothing else to do
                pass

    # -- image -----------------------------------------------------------

    def _context_files(self) -> dict[str, bytes]:
        """The builder image's build context: the recipe, publisher's source,
        its requirements and the CA bundle."""
        recipe = resources.files("publisher.resources").joinpath("docker")
        files = {name: recipe.joinpath(name).read_bytes() for name in ("Dockerfile", "install-system.sh")}
        files["requirements.txt"] = "\n".join(_runtime_requirements()).encode() + b"\n"
        files["ca-bundle.crt"] = self.settings.ca_bundle.read_bytes() if self.settings.ca_bundle else b""
        package = Path(__file__).resolve().parents[1]
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
                files[f"publisher/{path.relative_to(package).as_posix()}"] = path.read_bytes()
        return files

    def _image_tag(self) -> str:
        with self._lock:
            if self._image is None:
                h = hashlib.sha256(f"{__version__}\0{self.base_image}\0{self._base_image_id()}\0".encode())
                for name, data in sorted(self._context_files().items()):
                    h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
                h.update(json.dumps(self.settings.build_args(), sort_keys=True).encode())
                self._image = f"publisher-builder:{h.hexdigest()[:16]}"
            return self._image

    def _base_image_id(self) -> str:
        import docker

        try:
            return self._client.images.get(self.base_image).id
        except docker.errors.ImageNotFound:
            return "not-pulled"

    def _ensure_image(self, on_line: LineSink, log: Path) -> str:
        import docker

        tag = self._image_tag()
        try:
            self._client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        _note(log, on_line, f"building the builder image {tag} from {self.base_image} (once)")
        context = io.BytesIO()
        with tarfile.open(fileobj=context, mode="w") as tar:
            for name, data in self._context_files().items():
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
                tar.addfile(info, io.BytesIO(data))
        context.seek(0)
        args = {"BASE_IMAGE": self.base_image, **self.settings.build_args()}
        error = None
        try:
            for chunk in self._client.api.build(fileobj=context, custom_context=True, tag=tag, buildargs=args,
                                                rm=True, forcerm=True, decode=True):
                for line in (chunk.get("stream") or "").splitlines():
                    if line.strip():
                        _note(log, on_line, line)
                error = error or chunk.get("error")
        except docker.errors.APIError as err:
            error = _short(err)
        if error:
            raise BuildFailed(f"building the builder image from {self.base_image} failed: {error.strip()}")
        return tag

    # -- containers ------------------------------------------------------

    def _container(self, request: BuildRequest, on_line: LineSink):
        """The running container for this variant's toolchain (started on first use)."""
        key = request.planned.toolchain.key
        with self._lock:
            if self._closed:
                raise BuildFailed("cancelled")
            if key in self._containers:
                return self._containers[key]
            image = self._ensure_image(on_line, request.log)
            for note in self.settings.notes:
                _note(request.log, on_line, f"package index settings: {note}")
            root = request.project.root.resolve()
            volumes = {
                str(git.toplevel(root) or root): {"bind": str(SRC), "mode": "ro"},
                CACHE_VOLUME: {"bind": "/cache", "mode": "rw"},
                work_volume(root, key): {"bind": str(OUT), "mode": "rw"},
                **self.settings.mounts(),
            }
            if self.matrix_file:
                volumes[str(self.matrix_file)] = {"bind": "/etc/publisher/matrix.yaml", "mode": "ro"}
            environment = {
                **self.settings.environment(),
                # git refuses repositories owned by another uid; this one is read-only anyway
                "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
                # where `depends` archives come from (each is checked against its pinned hash there too)
                **({"PUBLISHER_GITHUB_MIRROR": mirror} if (mirror := env.github_mirror()) != env.GITHUB else {}),
            }
            container = self._client.containers.run(
                image, ["sleep", "infinity"], detach=True, init=True, volumes=volumes, environment=environment,
                labels={LABEL: "builder", f"{LABEL}.pid": str(os.getpid()), f"{LABEL}.host": socket.gethostname(),
                        f"{LABEL}.project": str(root)},
                name=f"publisher-{os.getpid()}-{uuid.uuid4().hex[:6]}-{key}",
            )
            _note(request.log, on_line, f"started container {container.name} ({image}) for toolchain {key}")
            self._containers[key] = container
            return container

    def _project_in_container(self, root: Path) -> PurePosixPath:
        root = root.resolve()
        top = git.toplevel(root)
        return SRC / root.relative_to(top).as_posix() if top else SRC

    def _inner_report(self, container, inner_out: PurePosixPath) -> dict:
        """The inner build's report (build/.publisher/build-report.json), per variant."""
        try:
            return json.loads(_read_file(container, inner_out / ".publisher" / "build-report.json")).get("variants", {})
        except Exception:  # no report: the inner build did not get that far; its output says why
            return {}

    def _append_inner_log(self, container, inner_log: PurePosixPath, log: Path) -> None:
        """The inner build's full log (toolchain, compiler commands) goes into ours."""
        try:
            text = _read_file(container, inner_log).decode(errors="replace")
        except Exception:
            return
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"--- build log inside the container ---\n{text}--- end of the container's log ---\n")

    def _copy_out(self, container, source: PurePosixPath, stage: Path) -> None:
        """Copy a folder out of the container into `stage`, owned by self.owner."""
        stream, _ = container.get_archive(str(source))
        with tempfile.TemporaryFile() as buf:
            for chunk in stream:
                buf.write(chunk)
            buf.seek(0)
            with tarfile.open(fileobj=buf) as tar:
                prefix = source.name + "/"
                for member in tar.getmembers():
                    if not member.name.startswith(prefix) or not (member.isfile() or member.isdir()):
                        continue
                    rel = PurePosixPath(member.name[len(prefix):])
                    if rel.is_absolute() or ".." in rel.parts:
                        raise BuildFailed(f"refusing unsafe path {member.name} from the container")
                    target = stage / rel
                    if member.isdir():
                        target.mkdir(parents=True, exist_ok=True)
                    else:
                        target.parent.mkdir(parents=True, exist_ok=True)
                        with tar.extractfile(member) as src, open(target, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                    target.chmod(member.mode & 0o755 | 0o200 | (0o555 if member.isdir() else 0o444))
                    if os.getuid() == 0 and self.owner != (0, 0):
                        os.chown(target, *self.owner)


def _read_file(container, path: PurePosixPath) -> bytes:
    stream, _ = container.get_archive(str(path))
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        return tar.extractfile(tar.getmembers()[0]).read()


def _runtime_requirements() -> list[str]:
    """publisher's own dependencies (no extras; uv and the ABI checker the inner build reports with among them)."""
    return sorted(set(distribution.requirements()))


def work_volume(root: Path, toolchain_key: str) -> str:
    """Named volume for a project's inner build folders under one toolchain."""
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return f"publisher-work-{root.name[:40]}-{digest}-{toolchain_key}"


def _remove_orphans(client) -> None:
    """Remove builder containers left by a publisher process on this host
    that no longer exists (killed with SIGKILL, say)."""
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=builder"}):
        labels = container.labels
        if labels.get(f"{LABEL}.host") != host:
            continue
        try:
            pid = int(labels.get(f"{LABEL}.pid", ""))
            if pid > 0:
                os.kill(pid, 0)
                continue  # still running
        except (ProcessLookupError, ValueError):
            pass
        except PermissionError:
            continue  # alive, another user's
        container.remove(force=True)


def _note(log: Path, on_line: LineSink | None, text: str) -> None:
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    if on_line:
        on_line(text)


def _short(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
