"""The run's shared compile slots: the real ninja draws its parallelism from
the jobserver, so two variants' ninjas together run at most the pool plus
one compile each (their implicit slots), and a variant alone uses them all."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import ninja

from publisher.builder.jobserver import JobServer

NINJA = os.path.join(ninja.BIN_DIR, "ninja")


def _project(folder: Path, steps: int, seconds: float) -> Path:
    """A build.ninja whose steps record when they start and end."""
    folder.mkdir(parents=True)
    lines = ["rule step", f"  command = date +%s.%N > $out.start && sleep {seconds} && date +%s.%N > $out", ""]
    lines += [f"build s{i}: step" for i in range(steps)]
    (folder / "build.ninja").write_text("\n".join(lines) + "\n")
    return folder


def _intervals(folders: list[Path]) -> list[tuple[float, float]]:
    out = []
    for folder in folders:
        for start in folder.glob("*.start"):
            out.append((float(start.read_text()), float(start.with_suffix("").read_text())))
    return out


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = now = 0
    for _, delta in events:
        now += delta
        most = max(most, now)
    return most


def _build(server: JobServer, folder: Path) -> None:
    env = {**os.environ, **server.env()}
    subprocess.run([NINJA, "-C", str(folder)], env=env, check=True, capture_output=True)


def test_two_ninjas_share_the_pool(tmp_path):
    a = _project(tmp_path / "a", steps=6, seconds=0.4)
    b = _project(tmp_path / "b", steps=6, seconds=0.4)
    server = JobServer(2)
    try:
        threads = [threading.Thread(target=_build, args=(server, f)) for f in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.close()
    spans = _intervals([a, b])
    assert len(spans) == 12
    assert _most_at_once(spans) == 4  # 2 slots from the pool + each ninja's implicit one, never more


def test_one_variant_alone_uses_every_slot(tmp_path):
    a = _project(tmp_path / "a", steps=8, seconds=0.4)
    server = JobServer(3)
    try:
        _build(server, a)
    finally:
        server.close()
    assert _most_at_once(_intervals([a])) == 4


def test_the_pool_is_full_again_after_the_builds(tmp_path):
    a = _project(tmp_path / "a", steps=4, seconds=0.1)
    server = JobServer(3)
    try:
        _build(server, a)
        fd = os.open(server.fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            assert os.read(fd, 16) == b"+++"  # every slot a client took came back
        finally:
            os.close(fd)
    finally:
        server.close()
