"""One GNU make jobserver for a whole build run: a pool of compile slots that
every variant's ninja and every nvcc draw from, so variants built at once
share the cores instead of splitting them, and nvcc's per-architecture
threads take turns with the other compiles.

Protocol (GNU make 4.4, `fifo:` style, which ninja >= 1.13 and nvcc
`--jobserver` read from MAKEFLAGS): a named pipe holds one byte per free
slot; every client owns one implicit slot and reads a byte for each extra
process it runs, writing it back when that process ends. The implicit slot
of a variant's ninja is a byte the scheduler's worker reads here first."""

from __future__ import annotations

import os
import select
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_TOKEN = b"+"


class JobServer:
    def __init__(self, slots: int):
        self.slots = max(1, slots)
        self._dir = Path(tempfile.mkdtemp(prefix="publisher-jobserver-"))
        self.fifo = self._dir / "fifo"
        os.mkfifo(self.fifo, 0o600)
        # O_RDWR: opening never blocks, and the pipe never reads as closed while we hold it
        self._fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)
        os.write(self._fd, _TOKEN * self.slots)
        self._aborted = threading.Event()

    def env(self) -> dict[str, str]:
        """What a client's environment needs to find the pool."""
        return {"MAKEFLAGS": f"-j{self.slots} --jobserver-auth=fifo:{self.fifo}"}

    @contextmanager
    def slot(self) -> Iterator[bool]:
        """Hold one slot for the block (a variant's ninja: its implicit slot).
        Yields False when the pool was aborted while waiting (a cancelled run)."""
        got = self._acquire()
        try:
            yield got
        finally:
            if got:
                os.write(self._fd, _TOKEN)

    def abort(self) -> None:
        """Wake every waiter: a cancelled run kills clients, whose slots are then lost."""
        self._aborted.set()

    def close(self) -> None:
        self.abort()
        os.close(self._fd)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _acquire(self) -> bool:
        while not self._aborted.is_set():
            ready, _, _ = select.select([self._fd], [], [], 0.2)
            if not ready:
                continue
            try:
                if os.read(self._fd, 1):
                    return True
            except BlockingIOError:  # another client took that byte first
                continue
        return False
