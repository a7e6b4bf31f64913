"""The one way publisher runs other programs: logs the command, redacts
secrets, streams output line by line to a log file and an optional callback."""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from publisher.secrets import redact

LineSink = Callable[[str], None]


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    returncode: int
    output: str  # combined stdout+stderr, redacted
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def first_error_line(self) -> str:
        lines = [line for line in self.output.splitlines() if line.strip()]
        for line in lines:
            low = line.lower()
            if "error" in low or "fatal" in low or "failed" in low:
                return line.strip()[:300]
        return (lines[-1].strip() if lines else f"exit code {self.returncode}")[:300]


GUARD = Path(__file__).with_name("guard.py")
_live: set[subprocess.Popen] = set()
_inherited: set[int] = set()  # file descriptors every child keeps open (the build lock)
_live_lock = threading.Lock()
_cancelled = threading.Event()


def kill_all() -> None:
    """Kill every process group started by `run` that is still running, and
    refuse to start new ones until `allow_new()` (a cancelled build: worker
    threads do not see Ctrl-C, and must not start the next step)."""
    _cancelled.set()
    with _live_lock:
        procs = list(_live)
    for proc in procs:
        _kill_group(proc)


def allow_new() -> None:
    _cancelled.clear()


@contextmanager
def inherited(fd: int) -> Iterator[None]:
    """Children started meanwhile keep `fd` open: a lock on it stays held
    until the last of them is gone, even when publisher itself was killed."""
    _inherited.add(fd)
    try:
        yield
    finally:
        _inherited.discard(fd)


def _guarded(argv: tuple[str, ...], env: Mapping[str, str]) -> list[str]:
    """argv run under guard.py, which kills the child's whole tree when
    publisher dies (Linux); elsewhere argv itself."""
    if sys.platform != "linux":
        return list(argv)
    if os.sep not in argv[0] and shutil.which(argv[0], path=env.get("PATH", os.defpath)) is None:
        # as Popen itself would: callers tell a missing program from a failing one
        raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {argv[0]!r}", argv[0])
    return [sys.executable, "-I", "-S", str(GUARD), str(os.getpid()), *argv]


def format_command(argv: Sequence[str]) -> str:
    return redact(" ".join(shlex.quote(str(a)) for a in argv))


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    on_line: LineSink | None = None,
    timeout: float | None = None,
    input_text: str | None = None,
) -> RunResult:
    """Run argv to completion. Output is captured (redacted), appended to `log`
    and passed line by line to `on_line`. The child gets its own session so a
    timeout or Ctrl-C kills the whole tree, and runs under guard.py so that
    tree also dies when publisher is killed."""
    argv = tuple(str(a) for a in argv)
    if _cancelled.is_set():
        return RunResult(argv, -9, "cancelled before start\n")
    full_env = dict(os.environ if env is None else env)
    chunks: list[str] = []
    log_fh = open(log, "a", encoding="utf-8") if log else None
    try:
        if log_fh:
            log_fh.write(f"$ {format_command(argv)}\n")
            log_fh.flush()
        proc = subprocess.Popen(
            _guarded(argv, full_env),
            cwd=str(cwd) if cwd else None,
            env=full_env,
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
            pass_fds=tuple(_inherited),
        )
        with _live_lock:
            _live.add(proc)
        if _cancelled.is_set():  # cancelled while starting: kill_all may have missed it
            _kill_group(proc)

        def pump() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = redact(raw)
                chunks.append(line)
                if log_fh:
                    log_fh.write(line)
                    log_fh.flush()
                if on_line:
                    on_line(line.rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        if input_text is not None:
            assert proc.stdin is not None
            proc.stdin.write(input_text)
            proc.stdin.close()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            with _live_lock:
                _live.discard(proc)
        reader.join(timeout=5)
        return RunResult(argv, proc.returncode, "".join(chunks), timed_out)
    finally:
        if log_fh:
            log_fh.close()


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole session: its process group, and the groups its
    children made for themselves (ninja starts each compiler in its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in _session_members(proc.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _session_members(sid: int) -> list[int]:
    """Processes whose session id is `sid` (Linux /proc; empty elsewhere)."""
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after "pid (comm)": state ppid pgrp session ...
            members.append(int(entry))
    return members
