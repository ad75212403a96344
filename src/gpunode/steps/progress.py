"""Turn a command's streamed `@@progress DONE TOTAL NAME` lines into callbacks.

Long steps (weight staging, installs) print these markers on stdout; the
transport streams stdout into a ProgressSink as it arrives, so the CLI can
draw a live bar (bytes, rate, ETA) while the command still runs.
"""

from __future__ import annotations

from collections.abc import Callable

#: (done, total, name, unit="bytes", step=""); see gpunode.cli.progress.Feed
Progress = Callable[..., None]


class ProgressSink:
    """A write()-able sink: parses marker lines, keeps everything else."""

    def __init__(self, on_progress: Progress | None):
        self.on_progress = on_progress
        self._pending = b""
        self.lines: list[str] = []

    def write(self, data: bytes) -> int:
        self._pending += data
        *complete, self._pending = self._pending.split(b"\n")
        for raw in complete:
            self._line(raw.decode("utf-8", "replace"))
        return len(data)

    def _line(self, line: str) -> None:
        if line.startswith("@@progress "):
            parts = line.split(" ", 3)
            if self.on_progress and len(parts) >= 3:
                self.on_progress(int(parts[1]), int(parts[2]), parts[3] if len(parts) > 3 else "")
            return
        self.lines.append(line)

    def flush(self) -> None:
        if self._pending:
            self._line(self._pending.decode("utf-8", "replace"))
            self._pending = b""
