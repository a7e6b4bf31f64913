"""publisher's children live no longer than publisher, however it dies; a
rerun does not take the build lock while a killed build's processes still
run; Ctrl-C stops publisher even when it was launched with SIGINT ignored."""

from __future__ import annotations

import fcntl
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from publisher import runner, state

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the guard uses Linux prctl")


def _alive(token: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", token], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


def _sleepers(token: str) -> list[str]:
    return [line for line in _alive(token) if line.split(None, 1)[1].startswith("sleep ")]


def _start_holder(tmp_path: Path, token: str) -> subprocess.Popen:
    """A process that takes the build lock and runs, through runner.run, a shell that
    starts two sleepers: one in a session of its own that ignores SIGTERM, SIGINT and
    SIGHUP (like a compiler ninja started), one plain; then waits. `token` is a
    number: each sleeper sleeps 600.<token> seconds, so its command line names it."""
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from publisher import runner
        from publisher.builder.atomic import build_lock
        with build_lock(Path({str(tmp_path / 'build')!r})):
            print("locked", flush=True)
            runner.run(["sh", "-c", "setsid sh -c 'trap \"\" TERM INT HUP; sleep 600.{token}; :' & "
                        "sleep 600.{token} & wait"])
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    deadline = time.monotonic() + 60
    while len(_sleepers(token)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_sleepers(token)) == 2, "the test's sleepers did not start"
    return proc


def test_children_die_with_publisher_when_it_is_killed(tmp_path):
    token = str(uuid.uuid4().int % 10**12)
    holder = _start_holder(tmp_path, token)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(token) == [], "processes outlived the killed publisher"


def test_a_rerun_does_not_take_the_lock_while_a_killed_builds_processes_run(tmp_path):
    token = str(uuid.uuid4().int % 10**12)
    holder = _start_holder(tmp_path, token)
    lock_file = state.state_dir(tmp_path / "build") / "build.lock"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    deadline = time.monotonic() + 10
    with open(lock_file, "w") as fh:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the lock was never released"
                time.sleep(0.01)
        # whoever takes the lock finds no process of the killed build still running
        assert _alive(token) == []


def test_commands_keep_their_exit_status_signal_and_missing_program_error(tmp_path):
    assert runner.run(["sh", "-c", "exit 7"]).returncode == 7
    assert runner.run(["sh", "-c", "kill -SEGV $$"]).returncode == -signal.SIGSEGV
    assert runner.run(["cat"], input_text="hello\n").output == "hello\n"
    with pytest.raises(FileNotFoundError):
        runner.run([f"no-such-program-{uuid.uuid4().hex}"])


def test_ctrl_c_stops_publisher_launched_with_sigint_ignored(tmp_path):
    """`publisher ... &` in a script starts it with SIGINT ignored; SIGINT must still stop it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "publisher", "hub-server", "--port", "0", "--data-dir", str(tmp_path / "hub")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert "Hub-compatible server" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail("SIGINT did not stop publisher launched with SIGINT ignored")
    assert proc.returncode in (0, 130)
