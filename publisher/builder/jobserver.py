"""One GNU make jobserver for a whole build run: a pool of compile slots that
every variant's ninja draws from, so variants built at once share the cores
instead of splitting them. (nvcc's architecture threads are counted by
compile.py instead: nvcc 13.0's own `--jobserver` took no slot from this pool.)

Protocol (GNU make 4.4, `fifo:` style, which ninja >= 1.13 reads from
MAKEFLAGS): a named pipe holds one byte per free slot; a client reads a byte
for each process it runs beyond its implicit one and writes it back when that
process ends.

Each variant's ninja also has its implicit slot, so a run may have one
compile per variant in flight above the pool. The alternative, taking a
byte for each ninja's implicit slot, wastes a core: once the ninja's first
compile ends, its implicit slot sits idle while a long compile holds a byte."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_TOKEN = b"+"


class JobServer:
    def __init__(self, slots: int):
        self.slots = max(1, slots)
        self._dir = Path(tempfile.mkdtemp(prefix="publisher-jobserver-"))
        self.fifo = self._dir / "fifo"
        os.mkfifo(self.fifo, 0o600)
        # held open for the run: the pipe never reads as closed between clients
        self._fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)
        os.write(self._fd, _TOKEN * self.slots)

    def env(self) -> dict[str, str]:
        """What a client's environment needs to find the pool."""
        return {"MAKEFLAGS": f"-j{self.slots} --jobserver-auth=fifo:{self.fifo}"}

    def close(self) -> None:
        os.close(self._fd)
        shutil.rmtree(self._dir, ignore_errors=True)
