"""The `process` executor: a job's command runs as a plain process on this
machine (for a machine without Docker, e.g. a GPU box). The image is recorded
but not used; the host's GPUs are visible to the command.

- The command runs in a session of its own under publisher's guard (the
  guard.py that runner uses), so cancelling, a timeout or the server's end
  kills its whole tree, daemons included, and so does the server being killed.
- Its environment is this machine's, less the Hub tokens the server itself
  holds (HF_TOKEN ...), plus the job's environment and secrets; HF_TOKEN_PATH
  points at a file that does not exist, so huggingface_hub in the job does not
  find this machine's login either: a job has a token only as a secret.
- Volumes: the command starts in a private mount namespace (`unshare --mount`,
  root on Linux) where each volume's folder is bind-mounted read-only at its
  mountPath, so the same command works unchanged and two jobs mounting the
  same path each see only their own files. A mountPath missing on the host is
  created as an empty folder (mount points are not namespaced) and removed
  when the last job using it ends. Without `unshare` the job ends in ERROR.
  Limits: a job running as root can undo its own mounts (it only reaches its
  own copy of the files); mounting over system folders (/usr, /etc) hides them
  from the command as it would in a container.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from publisher import runner
from publisher.hub_server.jobs import metrics
from publisher.hub_server.jobs.executor import NOTE, Launch, LaunchFailed, LineSink, Running
from publisher.secrets import _SECRET_ENV

_STOP_GRACE = 5.0  # seconds the guard gets to end the tree before the session is killed outright
_SYSTEM_PATHS = ("", "/proc", "/sys", "/dev")  # "" is the root, once trailing slashes are stripped


class ProcessExecutor:
    name = "process"

    def __init__(self):
        self._lock = threading.Lock()
        self._mount_users: dict[str, int] = {}  # mountPath -> jobs using it
        self._created: dict[str, list[Path]] = {}  # mountPath -> folders this server made for it
        self._unshare_problem: str | None = None
        self._unshare_checked = False
        self.running = Running()

    # -- the interface ----------------------------------------------------------
    def prepare(self, launch: Launch, note: LineSink) -> None:
        note(f"{NOTE} process executor: the command runs on this machine; "
             f"the image {launch.image or launch.space_id!r} is not used")
        if not launch.argv:
            raise LaunchFailed("The process executor needs a command: a job without one runs the image's own, "
                               "and this executor runs no image")
        env = self.environment(launch)
        if os.sep not in launch.argv[0] and shutil.which(launch.argv[0], path=env.get("PATH", os.defpath)) is None:
            raise LaunchFailed(f"Failed to start the command: {launch.argv[0]!r}: executable file not found in $PATH")
        if launch.flavor.gpu is not None and not Path("/dev/nvidiactl").exists():
            note(f"{NOTE} flavor {launch.flavor.name} has {launch.flavor.gpu.quantity}x {launch.flavor.gpu.model}; "
                 "this machine shows no NVIDIA GPU (/dev/nvidiactl is missing): the command runs without one")
        if launch.mounts:
            problem = self._unshare()
            if problem:
                raise LaunchFailed(f"The process executor cannot mount volumes on this machine: {problem}. "
                                   "Run the hub-server as root on Linux, or use --jobs-executor docker")
            for mount in launch.mounts:
                target = Path(mount.mount_path)
                if mount.mount_path.rstrip("/") in _SYSTEM_PATHS:
                    raise LaunchFailed(f"Cannot mount a volume at {mount.mount_path}: a system folder")
                if target.exists() and not target.is_dir():
                    raise LaunchFailed(f"Cannot mount a volume at {mount.mount_path}: it is a file on this machine")

    def start(self, launch: Launch, on_line: LineSink) -> ProcessAttempt:
        argv = list(launch.argv)
        if launch.mounts:
            self._claim([m.mount_path for m in launch.mounts])
            argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _mount_script(launch), "job",
                    *argv]
        env = self.environment(launch)
        try:
            proc = subprocess.Popen(
                runner._guarded(tuple(argv), env), cwd=str(launch.workdir) if launch.workdir else None, env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                errors="replace", start_new_session=True)
        except OSError as err:
            self.release(launch)
            raise LaunchFailed(f"Failed to start the command: {err}") from None
        attempt = ProcessAttempt(proc, on_line, launch, self)
        self.running.add(attempt)
        return attempt

    def close(self) -> None:
        self.running.stop_all()

    # -- helpers ---------------------------------------------------------------
    @staticmethod
    def environment(launch: Launch) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV}
        nowhere = str((launch.workdir or Path("/nonexistent")) / ".no-hub-token")
        return {**base, "HF_TOKEN_PATH": nowhere, **launch.environment}

    def _unshare(self) -> str | None:
        """Why private mount namespaces are not available here (None: they are); asked once."""
        with self._lock:
            if not self._unshare_checked:
                if shutil.which("unshare") is None:
                    self._unshare_problem = "the `unshare` command is missing (util-linux)"
                else:
                    probe = runner.run(["unshare", "--mount", "--propagation", "private", "true"], timeout=30)
                    if not probe.ok:
                        self._unshare_problem = f"`unshare --mount` failed: {probe.first_error_line()}"
                self._unshare_checked = True
            return self._unshare_problem

    def _claim(self, paths: list[str]) -> None:
        """Make sure each mount point exists; count its users; remember what we created."""
        with self._lock:
            for done, path in enumerate(paths):
                target = Path(path)
                if self._mount_users.get(path, 0) == 0 and not target.exists():
                    missing = [p for p in (target, *target.parents) if not p.exists()]
                    try:
                        target.mkdir(parents=True)
                    except OSError as err:
                        self._unclaim(paths[:done])
                        raise LaunchFailed(f"Cannot make the mount point {path} on this machine: {err}") from None
                    self._created[path] = missing  # deepest first
                self._mount_users[path] = self._mount_users.get(path, 0) + 1

    def release(self, launch: Launch) -> None:
        """The job is over: mount points no job uses any more, and that we made, go."""
        with self._lock:
            self._unclaim([m.mount_path for m in launch.mounts])

    def _unclaim(self, paths: list[str]) -> None:
        for path in paths:
            if path not in self._mount_users:
                continue
            self._mount_users[path] -= 1
            if self._mount_users[path] > 0:
                continue
            del self._mount_users[path]
            for folder in self._created.pop(path, []):
                try:
                    folder.rmdir()
                except OSError:
                    break


def _mount_script(launch: Launch) -> str:
    lines = ["set -e"]
    for mount in launch.mounts:
        src, dst = shlex.quote(str(mount.host_path)), shlex.quote(mount.mount_path)
        lines.append(f"mount --bind {src} {dst}")
        if mount.read_only:
            lines.append(f"mount -o remount,bind,ro {dst}")
    lines.append('exec "$@"')
    return "\n".join(lines)


class ProcessAttempt:
    def __init__(self, proc: subprocess.Popen, on_line: LineSink, launch: Launch, executor: ProcessExecutor):
        self.proc = proc
        self.launch = launch
        self.executor = executor
        self._usage = metrics.SessionUsage(proc.pid)
        self._stopped = threading.Lock()
        self._done = False
        self._pump = threading.Thread(target=self._read, args=(on_line,), name=f"job-{launch.job_id}-out", daemon=True)
        self._pump.start()

    def _read(self, on_line: LineSink) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            on_line(raw.rstrip("\n"))

    def wait(self, timeout: float | None) -> int | None:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._finish()
        return code

    def stop(self) -> None:
        """SIGTERM to the guard, which kills the command's whole tree and exits;
        then, should anything hold on, the whole session is killed."""
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=_STOP_GRACE)
            except subprocess.TimeoutExpired:
                runner._kill_group(self.proc)
                self.proc.wait()
        runner._kill_group(self.proc)  # stragglers of the session, if any survived the guard
        self._finish()

    def _finish(self) -> None:
        with self._stopped:
            if self._done:
                return
            self._done = True
        self._pump.join(timeout=10)
        self.executor.release(self.launch)
        self.executor.running.discard(self)

    def sample(self) -> dict | None:
        if self.proc.poll() is not None:
            return None
        used, rss = self._usage.read()
        cpus = min(self.launch.flavor.cpus, float(os.cpu_count() or 1))  # the flavour's share of this machine
        total = metrics.host_memory()
        return metrics.sample(cpu_pct=100.0 * used / cpus, cpus=cpus, memory_used=rss, memory_total=total,
                              replica=f"process-{self.proc.pid}")

