"""A transport wrapper that counts round trips, so every recap can say what a run cost.

It forwards everything to the wrapped transport (including its translation of
transport failures, e.g. pct's "container not running") and owns nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import BinaryIO

from gpunode.transport.base import Held, Result, Stdin, Transport


class Metered(Transport):
    def __init__(self, inner: Transport):
        self.inner = inner
        self.name = inner.name
        self.commands = 0
        self._count_lock = threading.Lock()

    def _tick(self) -> None:
        with self._count_lock:
            self.commands += 1

    def _exec(self, argv: Sequence[str], stdin: Stdin, sink: BinaryIO | None, timeout: float | None):
        self._tick()
        return self.inner._exec(argv, stdin, sink, timeout)

    def hold(self, argv: Sequence[str]) -> Held:
        self._tick()
        return self.inner.hold(argv)

    def _raise_for_transport(self, result: Result) -> None:
        self.inner._raise_for_transport(result)
