"""Live progress: one line per target while its long steps run (staging, engine install,
readiness wait), fed by the steps' progress callbacks through the run's event sink.

Steps call `feed(done, total, name, unit=..., step=...)`; Feed turns that into a Progress
event for the sink (JSON lines get it as a `progress` event, throttled; people get LiveLines).
LiveLines draws only on a terminal: piped output stays quiet until the final lines.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

from gpunode.engine.events import Progress as ProgressEvent
from gpunode.engine.events import Start, TargetRecap


class Feed:
    """The progress callback of one target: (done, total, name, unit=, step=) -> a Progress event."""

    def __init__(self, target: str, emit: Callable[[Any], None]):
        self.target = target
        self.emit = emit

    def __call__(self, done: int, total: int, name: str = "", *, unit: str = "bytes", step: str = "") -> None:
        self.emit(ProgressEvent(self.target, step or "weights", int(done), int(total), unit, name))


def amount(done: int, total: int, unit: str) -> str:
    """'1.2 GiB/51.0 GiB', '3/8 servers', '12 packages', '40%'."""
    if unit == "percent":
        return f"{done}%"
    if unit == "bytes":
        return f"{_size(done)}/{_size(total)}" if total else _size(done)
    return f"{done}/{total} {unit}" if total else f"{done} {unit}"


def _size(n: int) -> str:
    for name, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {name}"
    return f"{n} B"


class LiveLines:
    """One transient line per running target: its current step, a bar, amounts, rate, elapsed."""

    def __init__(self, console: Console):
        self.console = console
        self.enabled = console.is_terminal
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._started: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def __call__(self, item: Start | ProgressEvent | TargetRecap) -> None:
        if not self.enabled:
            return
        with self._lock:
            if isinstance(item, Start):
                self._task(item.target, f"{item.target}: starting ({item.steps} steps)")
            elif isinstance(item, ProgressEvent):
                self._show(item)
            elif item.target in self._tasks and self._progress is not None:
                self._progress.remove_task(self._tasks.pop(item.target))

    def _task(self, target: str, text: str) -> TaskID:
        if self._progress is None:
            # here, not at the top: a run that is piped, or shows no line, never draws one (rich.progress
            # and rich.table, ~11 ms of every provision's start, issue 45)
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                                      TextColumn("{task.fields[amount]}"), TimeElapsedColumn(),
                                      console=self.console, transient=True)
            self._progress.start()
        if target not in self._tasks:
            self._tasks[target] = self._progress.add_task(text, total=None, amount="")
        return self._tasks[target]

    def _show(self, p: ProgressEvent) -> None:
        task = self._task(p.target, p.target)
        first = self._started.setdefault((p.target, p.step), (time.monotonic(), p.done))
        rate = ""
        took = time.monotonic() - first[0]
        if p.unit == "bytes" and took > 1 and p.done > first[1]:
            rate = f", {_size(int((p.done - first[1]) / took))}/s"
        detail = f" {p.detail}" if p.detail else ""
        assert self._progress is not None
        self._progress.update(task, description=f"{p.target} {p.step}:{detail}", total=p.total or None,
                              completed=p.done, amount=amount(p.done, p.total, p.unit) + rate)

    def stop(self) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
                self._progress = None
                self._tasks.clear()
