"""Output sinks for engine events: rich text for people, JSON lines for machines.

Both are callables that take each Event and TargetRecap as the engine emits
them, plus `finish(recaps)` once all targets are done. The JSON schema is in
docs/events.md; keep it in step with engine/events.py's SCHEMA_VERSION.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpunode.engine.events import CHANGED, FAILED, OK, SCHEMA_VERSION, SKIPPED, Event, Progress, Start, TargetRecap
from gpunode.errors import printable
from gpunode.secrets import redact_data

Redact = Callable[[str], str]

_STYLE = {OK: "green", CHANGED: "yellow", FAILED: "bold red", SKIPPED: "dim"}


def _same(text: str) -> str:
    return text


def _diff_text(diff: str) -> Text:
    out = Text()
    for line in diff.splitlines(keepends=True):
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        out.append(line, style=style)
    return out


class HumanReport:
    """One line per step and handler, diffs when the engine sent them, a recap table at the end.

    show_ok=False hides steps that needed nothing (the recap still counts them); brief=True also
    makes the recap of a run where nothing changed one line per target (the table is for runs
    with something to read in it).
    """

    def __init__(self, console: Console | None = None, *, show_ok: bool = True, redact: Redact = _same,
                 live: Callable[[Start | Progress | TargetRecap], None] | None = None, commands: bool = False,
                 brief: bool = False):
        """live: receives Start, Progress and TargetRecap items (the live progress lines).
        commands: print the commands a would-be change runs (check mode, `--commands`)."""
        self.console = console or Console()
        self.show_ok = show_ok
        self.brief = brief
        self.commands = commands
        # Everything this prints passes self.redact: masked, then escaped for the terminal (a reason
        # or a diff quotes what the target printed).
        self.redact = lambda text: printable(redact(text))
        self.live = live

    def __call__(self, item: Start | Event | Progress | TargetRecap) -> None:
        if isinstance(item, Start | Progress):
            if self.live is not None:
                self.live(item)
            return
        if isinstance(item, TargetRecap):
            if self.live is not None:
                self.live(item)
            self._target_done(item)
            return
        if item.status == OK and not self.show_ok:
            return
        word = "would change" if item.check and item.status == CHANGED else item.status
        what = self.redact(f"handler {item.step}" if item.kind == "handler" else item.step)
        reason, *more = self.redact(item.reason).splitlines() or [""]
        line = Text()
        line.append(f"{word:>12} ", style=_STYLE.get(item.status, ""))
        line.append(f"{printable(item.target)} ", style="bold")
        line.append(f"{item.role}: {what}")
        line.append(f"  {reason}", style="dim" if item.status == OK else "")
        if item.duration >= 0.1:
            line.append(f"  ({item.duration:.1f}s)", style="dim")
        self.console.print(line, highlight=False, soft_wrap=True)
        for extra in more:
            self.console.print(Text("             " + extra, style="red" if item.status == FAILED else ""),
                               highlight=False, soft_wrap=True)
        if item.diff:
            self.console.print(_diff_text(self.redact(item.diff)), highlight=False, soft_wrap=True)
        if self.commands and item.check and item.status == CHANGED:
            # "$ " marks a real command; a step whose apply is code says so without it.
            said = [f"$ {self.redact(c)}" for c in item.commands] or ["(its apply is code, not a list of commands)"]
            for text in said:
                self.console.print(Text("             " + text, style="cyan"), highlight=False, soft_wrap=True)

    def _target_done(self, recap: TargetRecap) -> None:
        if recap.rolled_back:
            self.console.print(Text(f"{printable(recap.target)}: {self.redact(recap.rolled_back)}", style="bold red"),
                               highlight=False, soft_wrap=True)
        if recap.error:
            self.console.print(Text(f"{printable(recap.target)}: {self.redact(recap.error)}", style="bold red"),
                               highlight=False, soft_wrap=True)

    def finish(self, recaps: Sequence[TargetRecap]) -> None:
        check = any(r.check for r in recaps)
        if self.brief and recaps and all(r.succeeded and not r.changed for r in recaps):
            for r in recaps:
                trips = f"{r.round_trips} round trip{'s' if r.round_trips != 1 else ''}"
                line = Text()
                line.append(f"{printable(r.target)}: ", style="bold")
                line.append("ok", style="green")
                line.append(f", nothing {'would change' if check else 'changed'} ({r.ok} steps, {trips}, "
                            f"{r.duration:.1f}s)")
                self.console.print(line, highlight=False, soft_wrap=True)
            return
        table = Table(title="recap (check mode: nothing was changed)" if check else "recap")
        for name in ("target", "ok", "changed", "failed", "skipped", "time", "round trips", "result"):
            # the result is never cut or wrapped ("UNREACHABLE" in 80 columns): the others give way
            table.add_column(name, justify="left" if name in ("target", "result") else "right",
                             no_wrap=name == "result", min_width=len("UNREACHABLE") if name == "result" else None,
                             overflow="fold")
        for r in recaps:
            result = (Text("ok", style="green") if r.succeeded else
                      Text("rolled back", style="bold red") if r.rolled_back else
                      Text("UNREACHABLE", style="bold red") if r.unreachable else Text("FAILED", style="bold red"))
            table.add_row(printable(r.target), str(r.ok), Text(str(r.changed), style="yellow" if r.changed else ""),
                          Text(str(r.failed), style="red" if r.failed else ""), str(r.skipped),
                          f"{r.duration:.1f}s", str(r.round_trips), result)
        self.console.print(table)


def timestamp(now: float | None = None) -> str:
    """UTC, ISO 8601, milliseconds: 2026-12-03T09:47:13.123Z."""
    now = time.time() if now is None else now
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


class JsonLines:
    """One JSON object per line: start, plan, step/handler and progress events, a target line per
    target, a final recap. Every line carries `ts` (when it was written) and `run` (the run id,
    the same one the target's journal records)."""

    #: At most one progress line per target and step per this many seconds (the last one always).
    PROGRESS_EVERY_S = 1.0

    def __init__(self, stream: TextIO | None = None, *, redact: Redact = _same, run_id: str = ""):
        """redact: applied to every string of an event's structure before json.dumps, so a secret
        holding a quote is masked as itself, not searched for in its JSON-escaped form."""
        self.stream = stream or sys.stdout
        self.redact = redact
        self.run_id = run_id
        self._lock = threading.Lock()  # progress comes from the targets' threads
        self._last_progress: dict[tuple[str, str], float] = {}

    def _write(self, data: dict[str, Any]) -> None:
        line = {"v": data.pop("v", SCHEMA_VERSION), "type": data.pop("type"), "ts": timestamp(),
                "run": self.run_id, **data}
        text = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self.stream.write(text)
            self.stream.flush()

    def __call__(self, item: Start | Event | Progress | TargetRecap) -> None:
        if isinstance(item, Progress) and not self._due(item):
            return
        self._write(redact_data(item.to_dict(), self.redact))

    def _due(self, item: Progress) -> bool:
        key = (item.target, item.step)
        now = time.monotonic()
        with self._lock:
            final = item.total > 0 and item.done >= item.total
            if not final and now - self._last_progress.get(key, float("-inf")) < self.PROGRESS_EVERY_S:
                return False
            self._last_progress[key] = now
            return True

    def plan(self, target: str, plan: dict[str, Any]) -> None:
        """The resolved plan of a target (schema gpunode.plan/1), before its steps run."""
        self._write({"v": SCHEMA_VERSION, "type": "plan", "target": target, "plan": redact_data(plan, self.redact)})

    def finish(self, recaps: Sequence[TargetRecap]) -> None:
        self._write(recap_event(recaps, redact=self.redact))


def recap_event(recaps: Sequence[TargetRecap], *, redact: Redact = _same) -> dict[str, Any]:
    """The final line of a --json run: totals (`unreachable` counts targets) and one entry per target."""
    targets = []
    for r in recaps:
        entry = r.to_dict()
        del entry["v"], entry["type"]
        targets.append(redact_data(entry, redact))
    return {
        "v": SCHEMA_VERSION,
        "type": "recap",
        "check": any(r.check for r in recaps),
        "succeeded": all(r.succeeded for r in recaps),
        "ok": sum(r.ok for r in recaps),
        "changed": sum(r.changed for r in recaps),
        "failed": sum(r.failed for r in recaps),
        "skipped": sum(r.skipped for r in recaps),
        "unreachable": sum(r.unreachable for r in recaps),
        "duration": round(max((r.duration for r in recaps), default=0.0), 3),
        "targets": targets,
    }
