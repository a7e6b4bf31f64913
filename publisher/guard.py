"""Runs one command for publisher and takes its whole process tree down when
publisher dies, however it dies (SIGKILL included), on Linux.

    python guard.py PUBLISHER_PID COMMAND [ARG...]

The guard asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG)
and adopts every orphaned descendant (PR_SET_CHILD_SUBREAPER), so on SIGTERM,
SIGINT or SIGHUP it can kill the command and everything the command started,
even processes in process groups or sessions of their own (ninja gives each
compiler its own). It then exits as the command would have; otherwise it
waits for the command and its orphans and exits with the command's status.

It is a standalone script run with `python -I -S` (no site, no publisher import: fast);
on systems without prctl it simply runs the command.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _descendants(root: int) -> list[int]:
    """Every process below `root` (Linux /proc), found through parent ids."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _end_tree() -> None:
    """Kill every descendant and reap them, until none is left: a process can
    fork between a scan and its kill, and its orphan then comes to us."""
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:  # no child left, so no descendant (orphans come to us, the subreaper)
            return
        for pid in _descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def _stop(signum: int, frame: object) -> None:
    _end_tree()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main(argv: list[str]) -> int:
    parent, command = int(argv[1]), argv[2:]
    guarded = _prctl(PR_SET_CHILD_SUBREAPER, 1) and _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    for signum in _STOP:
        signal.signal(signum, _stop)
    if guarded and os.getppid() != parent:  # publisher died before the death signal was armed
        return 128 + signal.SIGTERM
    # handled signals reset to default in the command; an ignored SIGINT (a `cmd &` launch) does not
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        except OSError as err:
            os.write(2, f"{command[0]}: {err.strerror}\n".encode(errors="replace"))
            os._exit(127)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    _end_tree()  # what the command left behind (daemons, stray compilers) goes with it
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for handled in _STOP:
            signal.signal(handled, signal.SIG_DFL)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die the same way, so publisher sees the signal
        return 128 + signum
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
