"""The `docker` executor (the default): each job runs in a container of its
image on the local Docker engine, as on the Hub.

- The image is pulled when the engine does not have it; a failed pull ends
  the job in ERROR ("Failed to pull image ...").
- `command` replaces the image's entrypoint and `arguments` its CMD, as the
  Hub's (Kubernetes') fields do; environment and secrets are the container's
  environment; repo volumes are bind-mounted read-only (`-v host:path:ro`).
- The flavour's vCPUs and RAM are the container's limits, capped at what this
  machine has; a flavour with GPUs gets `--gpus all` when the engine has the
  NVIDIA runtime, and otherwise runs without, which the job's log says once.
- Containers use the host's network, so a job reaches this server (and
  anything else on 127.0.0.1) at the address the server listens on.
- Every container carries labels naming this host and server process;
  containers of a server that is gone (killed) are removed at the next start.
"""

from __future__ import annotations

import os
import socket
import threading

from publisher.backends.docker import ENGINE_HINT
from publisher.hub_server.jobs import metrics
from publisher.hub_server.jobs.executor import NOTE, Launch, LaunchFailed, LineSink, Running, unmet_requirement

LABEL = "org.huggingface.publisher"
ROLE = "hub-job"
_STOP_TIMEOUT = 30


def _short(err: Exception) -> str:
    text = getattr(err, "explanation", None) or str(err)
    text = str(text).strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


class DockerExecutor:
    name = "docker"

    def __init__(self):
        self._client = None
        self._problem: str | None = None
        self._lock = threading.Lock()
        self.running = Running()
        self._gpu_runtime: bool | None = None

    def _engine(self):
        """The Docker client, connected on first use; a missing SDK or engine is the job's ERROR message."""
        with self._lock:
            if self._client is None and self._problem is None:
                try:
                    import docker
                except ImportError:
                    self._problem = unmet_requirement(self.name) or "the Docker SDK for Python cannot be imported"
                else:
                    try:
                        client = docker.from_env(timeout=600)
                        client.ping()
                        self._client = client
                        self._gpu_runtime = "nvidia" in (client.info().get("Runtimes") or {})
                        _remove_orphans(client)
                    except docker.errors.DockerException as err:
                        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
                        self._problem = f"no Docker engine answers at {where} ({_short(err)}); {ENGINE_HINT}"
            if self._problem:
                raise LaunchFailed(f"Cannot run the job: {self._problem}")
            return self._client

    # -- the interface ----------------------------------------------------------
    def prepare(self, launch: Launch, note: LineSink) -> None:
        client = self._engine()  # first: without the Docker SDK it is the job's ERROR message
        import docker

        if launch.image is None:
            raise LaunchFailed(f"Cannot run the image of Space {launch.space_id}: this Hub-compatible server "
                               "builds no Space images; give a Docker image (dockerImage) instead")
        try:
            client.images.get(launch.image)
        except docker.errors.ImageNotFound:
            repository, tag = docker.utils.parse_repository_tag(launch.image)
            try:
                client.images.pull(repository, tag=tag or "latest")
            except docker.errors.DockerException as err:
                raise LaunchFailed(f"Failed to pull image {launch.image!r}: {_short(err)}") from None
        except docker.errors.DockerException as err:
            raise LaunchFailed(f"Failed to inspect image {launch.image!r}: {_short(err)}") from None
        if launch.flavor.gpu is not None and not self._gpu_runtime:
            note(f"{NOTE} flavor {launch.flavor.name} has {launch.flavor.gpu.quantity}x {launch.flavor.gpu.model}; "
                 "this Docker engine has no NVIDIA runtime: the job runs without a GPU")

    def start(self, launch: Launch, on_line: LineSink) -> DockerAttempt:
        client = self._engine()
        import docker

        cpus = min(launch.flavor.cpus, float(os.cpu_count() or 1))
        options: dict = {
            "image": launch.image, "environment": dict(launch.environment), "network_mode": "host",
            "labels": {LABEL: ROLE, f"{LABEL}.host": socket.gethostname(), f"{LABEL}.pid": str(os.getpid()),
                       f"{LABEL}.job": launch.job_id},
            "volumes": {str(m.host_path): {"bind": m.mount_path, "mode": "ro" if m.read_only else "rw"}
                        for m in launch.mounts},
            "nano_cpus": int(cpus * 1e9), "detach": True,
        }
        if launch.command:
            options["entrypoint"] = list(launch.command)
            options["command"] = list(launch.arguments)
        elif launch.arguments:
            options["command"] = list(launch.arguments)
        memory = launch.flavor.memory_bytes
        if memory and memory <= metrics.host_memory():
            options["mem_limit"] = memory
        if launch.flavor.gpu is not None and self._gpu_runtime:
            options["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
        try:
            container = client.containers.create(**options)
        except docker.errors.DockerException as err:
            raise LaunchFailed(f"Failed to create the job's container: {_short(err)}") from None
        try:
            container.start()
        except docker.errors.DockerException as err:
            _remove(container)
            raise LaunchFailed(f"Failed to start the job's container: {_short(err)}") from None
        attempt = DockerAttempt(container, on_line, cpus, options.get("mem_limit") or metrics.host_memory(), self)
        self.running.add(attempt)
        return attempt

    def close(self) -> None:
        self.running.stop_all()


class DockerAttempt:
    def __init__(self, container, on_line: LineSink, cpus: float, memory_total: int, executor: DockerExecutor):
        self.container = container
        self.cpus = cpus
        self.memory_total = memory_total
        self.executor = executor
        self._exit: int | None = None
        self._ended = threading.Event()
        self._finished = threading.Lock()
        self._done = False
        self._pump = threading.Thread(target=self._read, args=(on_line,), daemon=True, name=f"{container.id[:12]}-out")
        self._waiter = threading.Thread(target=self._wait, daemon=True, name=f"{container.id[:12]}-wait")
        self._pump.start()
        self._waiter.start()

    def _read(self, on_line: LineSink) -> None:
        pending = b""
        try:
            for chunk in self.container.logs(stream=True, follow=True, stdout=True, stderr=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    on_line(line.decode(errors="replace").rstrip("\r"))
        except Exception:  # the engine hung up (container removed): the log ends here
            pass
        if pending:
            on_line(pending.decode(errors="replace").rstrip("\r"))

    def _wait(self) -> None:
        try:
            self._exit = int(self.container.wait().get("StatusCode", -1))
        except Exception:  # the engine lost the container: it is not running
            self._exit = -1
        self._ended.set()

    def wait(self, timeout: float | None) -> int | None:
        if not self._ended.wait(timeout):
            return None
        self._finish()
        return self._exit

    def stop(self) -> None:
        """Kill the container and wait until it is gone."""
        if not self._ended.is_set():
            try:
                self.container.kill()
            except Exception:  # already stopped
                pass
            self._ended.wait(_STOP_TIMEOUT)
        self._finish()

    def _finish(self) -> None:
        with self._finished:
            if self._done:
                return
            self._done = True
        self._pump.join(timeout=10)
        _remove(self.container)
        self.executor.running.discard(self)

    def sample(self) -> dict | None:
        if self._ended.is_set():
            return None
        try:
            stats = self.container.stats(stream=False)
        except Exception:  # the container just ended
            return None
        cpu, pre = stats.get("cpu_stats") or {}, stats.get("precpu_stats") or {}
        used = (cpu.get("cpu_usage", {}).get("total_usage", 0) - pre.get("cpu_usage", {}).get("total_usage", 0))
        system = cpu.get("system_cpu_usage", 0) - pre.get("system_cpu_usage", 0)
        online = cpu.get("online_cpus") or os.cpu_count() or 1
        cores_used = used / system * online if system > 0 else 0.0
        memory = (stats.get("memory_stats") or {}).get("usage", 0)
        return metrics.sample(cpu_pct=100.0 * cores_used / self.cpus, cpus=self.cpus, memory_used=memory,
                              memory_total=self.memory_total, replica=self.container.id[:12])


def _remove(container) -> None:
    try:
        container.remove(force=True)
    except Exception:  # already gone
        pass


def _remove_orphans(client) -> None:
    """Job containers of a hub-server on this host that no longer exists (killed)."""
    host = socket.gethostname()
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={ROLE}"}):
        labels = container.labels
        if labels.get(f"{LABEL}.host") != host:
            continue
        try:
            pid = int(labels.get(f"{LABEL}.pid", ""))
            if pid > 0:
                os.kill(pid, 0)
                continue
        except (ValueError, PermissionError):
            continue
        except ProcessLookupError:
            pass
        _remove(container)
