"""A live bar for long copies and installs: bytes, rate and ETA."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn


class ByteProgress:
    """Callable(done, total, name) that draws one bar per target; stop() when the run ends."""

    def __init__(self, console: Console, label: str = "staging"):
        self.console = console
        self.label = label
        self._progress: Progress | None = None
        self._task = None

    def __call__(self, done: int, total: int, name: str) -> None:
        if self._progress is None:
            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                      TransferSpeedColumn(), TimeRemainingColumn(), console=self.console,
                                      transient=True)
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=total)
        self._progress.update(self._task, completed=done, total=total, description=f"{self.label} {name}")
        if done >= total:
            self.stop()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
