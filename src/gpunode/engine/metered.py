"""A transport wrapper that counts round trips, so every recap can say what a run cost.

It forwards everything to the wrapped transport (including its translation of
transport failures, e.g. pct's "container not running") and owns nothing.
File transfers go to the wrapped transport's own methods, so a transport that
moves files its own way (pct push, SFTP) keeps doing so; each counts as one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from gpunode.transport.base import Held, Result, Sink, Stdin, Transport


class Metered(Transport):
    def __init__(self, inner: Transport):
        self.inner = inner
        self.name = inner.name
        self.commands = 0
        self._count_lock = threading.Lock()

    def _tick(self) -> None:
        with self._count_lock:
            self.commands += 1

    def _exec(self, argv: Sequence[str], stdin: Stdin, sink: Sink | None, timeout: float | None):
        self._tick()
        return self.inner._exec(argv, stdin, sink, timeout)

    def hold(self, argv: Sequence[str], until: str = "") -> Held:
        self._tick()
        return self.inner.hold(argv, until)

    def _raise_for_transport(self, result: Result) -> None:
        self.inner._raise_for_transport(result)

    def write_file(self, dest: str, data: bytes | BinaryIO, *, mode: int = 0o644, owner: str | None = None,
                   sha256: str | None = None) -> None:
        self._tick()
        self.inner.write_file(dest, data, mode=mode, owner=owner, sha256=sha256)

    def read_file(self, path: str, sink: Sink | None = None) -> bytes:
        self._tick()
        return self.inner.read_file(path, sink)

    def put_tree(self, local_dir: Path, dest_dir: str) -> None:
        self._tick()
        self.inner.put_tree(local_dir, dest_dir)

    def get_tree(self, src_dir: str, local_dir: Path) -> None:
        self._tick()
        self.inner.get_tree(src_dir, local_dir)
