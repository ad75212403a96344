"""Shared bits for the engine tests: a transport that counts round trips, a tree snapshot."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from gpunode.engine.events import Event, Progress, Start, TargetRecap
from gpunode.transport import LocalTransport


class CountingTransport(LocalTransport):
    """LocalTransport that records every command it is asked to run (run and hold)."""

    def __init__(self, name: str = "local"):
        super().__init__(name)
        self.commands: list[list[str]] = []

    def _exec(self, argv, stdin, sink, timeout):
        self.commands.append(list(argv))
        return super()._exec(argv, stdin, sink, timeout)

    def hold(self, argv):
        self.commands.append(list(argv))
        return super().hold(argv)


class Collect:
    """An emit callback that keeps what it gets."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.recaps: list[TargetRecap] = []
        self.others: list[Start | Progress] = []

    def __call__(self, item) -> None:
        if isinstance(item, Start | Progress):
            self.others.append(item)
        else:
            (self.recaps if isinstance(item, TargetRecap) else self.events).append(item)

    def by_step(self) -> dict[str, Event]:
        return {e.step: e for e in self.events}

    def statuses(self) -> list[tuple[str, str]]:
        return [(e.step, e.status) for e in self.events]


def snapshot(root: Path) -> dict[str, str]:
    """Every path under root with its type, mode and content hash or link target."""
    out: dict[str, str] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = path.lstat()
            if path.is_symlink():
                out[rel] = "link " + os.readlink(path)
            elif path.is_dir():
                out[rel] = f"dir {st.st_mode & 0o7777:o}"
            else:
                out[rel] = f"file {st.st_mode & 0o7777:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out
