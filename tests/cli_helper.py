"""The one way tests run the `publisher` command.

`run_cli(*args)` runs the real `publisher.cli.main` in this interpreter (the
contract layer: same parsing, rendering and exit codes, a few milliseconds
instead of a second of interpreter start). `run_cli(*args, process=True)`
starts `python -m publisher` in a fresh interpreter: for the tests that prove
what only a process shows (the console script, signals, the guard, a
huggingface_hub that reads HF_* while it is imported).

An in-process run leaves nothing behind for the next test: the environment,
the working directory, signal handlers, the process-wide runner, registered
secrets and publisher's caches are restored or cleared around each call.
"""

from __future__ import annotations

import functools
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from publisher import runner, secrets
from publisher.cli import main

__all__ = ["CliResult", "run_cli", "isolated"]

# the signals a command may take over (main: SIGINT; build: SIGTERM)
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(*args: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None,
            process: bool = False, timeout: float = 1800) -> CliResult:
    """`publisher ARGS` with exactly `env` as its environment (default: this
    process's), in `cwd`. In-process unless `process`; `timeout` bounds a
    process (an in-process hang is pytest-timeout's to stop)."""
    argv = [str(a) for a in args]
    if process:
        done = subprocess.run([sys.executable, "-m", "publisher", *argv], env=None if env is None else dict(env),
                              cwd=cwd, capture_output=True, text=True, timeout=timeout)
        return CliResult(done.returncode, done.stdout, done.stderr)
    out, err = io.StringIO(), io.StringIO()
    with isolated(env, cwd), redirect_stdout(out), redirect_stderr(err):
        try:
            main(argv)
            code = 0  # main always exits; a return would be a bug the assertion on code shows
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())


@contextmanager
def isolated(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Iterator[None]:
    """Run a command in-process as if it were its own process: whatever it
    changes in process-wide state is put back when it ends."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    saved_secrets = set(secrets._extra)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler)
        runner.kill_all()  # nothing a command started outlives it, as with a process
        runner.allow_new()
        secrets._extra.clear()
        secrets._extra.update(saved_secrets)
        _clear_caches()


def _clear_caches() -> None:
    """Every memoised answer in publisher: some depend on the environment or
    the files a test wrote, and the next test must compute its own."""
    for name, module in list(sys.modules.items()):
        if name == "publisher" or name.startswith("publisher."):
            for value in vars(module).values():
                if isinstance(value, functools._lru_cache_wrapper) and value.__module__ == name:
                    value.cache_clear()
    provision = sys.modules.get("publisher.toolchains.provision")
    if provision is not None:
        provision._version_cache.clear()
